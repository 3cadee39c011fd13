#include "harness/yaml_bounds.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

namespace tmx {
namespace {

// Thrown from inside the parser's callbacks to stop it at the first violation; never leaves this file.
struct BoundExceeded {
  Status status;
};

// Follows the event stream with one frame per open mapping or list, so the size and depth of each anchored
// node are known when an alias to it appears, and an alias to a node still open is a cycle.
class BoundsChecker : public YAML::EventHandler {
 public:
  BoundsChecker(const MarkLocator& where, const YamlLimits& limits, bool single_document)
      : where_(where), limits_(limits), single_document_(single_document) {}

  // Anchors belong to their document: yaml-cpp numbers them from 1 again in each.
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1 && single_document_) {
      Fail(mark, "a second YAML document starts here, and only the first is read, so everything from here on "
                 "would be ignored without a word; fix: remove the document marker ('---' or '...') to make one "
                 "document, or delete what follows it");
    }
    if (documents_ > limits_.max_documents) {
      Fail(mark, "the text holds more than " + std::to_string(limits_.max_documents) +
                     " YAML documents (the limit; a ',' where a document should start reads as endless empty "
                     "documents); fix: keep one document per file, and remove stray commas");
    }
    stack_.clear();
    closed_.clear();
    names_.clear();
  }
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    Leaf(mark, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = closed_.find(anchor);
    if (it == closed_.end()) {
      std::string name = AnchorName(anchor);
      Fail(mark, "alias *" + name + " refers to the node &" + name +
                     " that contains it, so its value would be infinite; fix: write the value out instead of the "
                     "alias");
    }
    Add(mark, it->second.nodes, it->second.depth);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Size {
    int64_t nodes = 0;
    int depth = 0;  // levels of mappings and lists, the node's own included; 0 for a scalar
  };
  struct Frame {
    YAML::anchor_t anchor;
    int64_t nodes_before;  // total_ when the node opened
    int level;             // 1 for the outermost mapping or list
    int deepest;           // the deepest level reached inside
  };

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Name(anchor);
    Add(mark, 1, 0);
    if (anchor != YAML::NullAnchor) closed_[anchor] = {1, 0};
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Name(anchor);
    Add(mark, 1, 1);
    int level = static_cast<int>(stack_.size()) + 1;
    stack_.push_back({anchor, total_ - 1, level, level});
  }

  void Close() {
    Frame f = stack_.back();
    stack_.pop_back();
    if (!stack_.empty()) stack_.back().deepest = std::max(stack_.back().deepest, f.deepest);
    if (f.anchor != YAML::NullAnchor) closed_[f.anchor] = {total_ - f.nodes_before, f.deepest - f.level + 1};
  }

  // Counts `nodes` more nodes inside the innermost open node, `depth` levels of mappings and lists deep.
  void Add(const YAML::Mark& mark, int64_t nodes, int depth) {
    total_ += nodes;
    if (total_ > limits_.max_nodes) {
      Fail(mark, "the document holds more than " + std::to_string(limits_.max_nodes) +
                     " values once its aliases are expanded (the limit; each *alias counts its anchor's whole "
                     "content again); fix: use fewer aliases or a smaller value");
    }
    int level = static_cast<int>(stack_.size()) + depth;
    if (level > limits_.max_depth) {
      Fail(mark, "values nest more than " + std::to_string(limits_.max_depth) +
                     " levels deep (the limit, aliases expanded); fix: flatten the nesting");
    }
    if (!stack_.empty()) stack_.back().deepest = std::max(stack_.back().deepest, level);
  }

  void Name(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor && !pending_name_.empty()) names_[anchor] = pending_name_;
    pending_name_.clear();
  }

  std::string AnchorName(YAML::anchor_t anchor) const {
    auto it = names_.find(anchor);
    return it == names_.end() ? std::to_string(anchor) : it->second;
  }

  [[noreturn]] void Fail(const YAML::Mark& mark, const std::string& problem) const {
    throw BoundExceeded{Status::InvalidArgument(where_(mark) + ": " + problem)};
  }

  const MarkLocator& where_;
  const YamlLimits& limits_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Size> closed_;
  std::map<YAML::anchor_t, std::string> names_;
  std::string pending_name_;
  int64_t total_ = 0;
  int documents_ = 0;
  bool single_document_;
};

// Runs the checker over every document of `text` (it stops the parser one document past the limit), or over
// the first and the start of a second, which it refuses.
Status Check(const std::string& text, const MarkLocator& where, const YamlLimits& limits, bool all_documents) {
  std::istringstream in(text);
  BoundsChecker checker(where, limits, !all_documents);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(checker)) {
    }
  } catch (const BoundExceeded& e) {
    return e.status;
  } catch (const YAML::Exception&) {
    // Malformed: left to the caller's YAML::Load, which reports it with its own advice.
  }
  return Status::OK();
}

}  // namespace

Status CheckYamlBounds(const std::string& text, const MarkLocator& where, const YamlLimits& limits) {
  return Check(text, where, limits, /*all_documents=*/false);
}

Status CheckYamlBoundsAllDocuments(const std::string& text, const MarkLocator& where, const YamlLimits& limits) {
  return Check(text, where, limits, /*all_documents=*/true);
}

YAML::Node CopyTree(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      YAML::Node out(YAML::NodeType::Map);
      out.SetStyle(node.Style());
      for (const auto& kv : node) out.force_insert(CopyTree(kv.first), CopyTree(kv.second));
      return out;
    }
    case YAML::NodeType::Sequence: {
      YAML::Node out(YAML::NodeType::Sequence);
      out.SetStyle(node.Style());
      for (const auto& item : node) out.push_back(CopyTree(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      YAML::Node out(node.Scalar());
      out.SetTag(node.Tag());
      return out;
    }
    case YAML::NodeType::Null:
      return YAML::Node(YAML::NodeType::Null);
    default:
      return YAML::Node();
  }
}

int64_t CountNodes(const YAML::Node& node) {
  int64_t n = 1;
  if (node.IsMap()) {
    for (const auto& kv : node) n += CountNodes(kv.first) + CountNodes(kv.second);
  } else if (node.IsSequence()) {
    for (const auto& item : node) n += CountNodes(item);
  }
  return n;
}

}  // namespace tmx
