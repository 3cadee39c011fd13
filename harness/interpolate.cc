#include "harness/interpolate.h"

#include <set>
#include <vector>

#include "base/text.h"
#include "harness/config.h"

namespace tmx {
namespace {

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Resolves on demand: a referenced key is resolved (in place) before its value is used, so a string is
// expanded once, and a key met again while it is being resolved is a cycle. A mapping or list referenced
// whole is walked again at each reference, which costs no more than the copy the nodes budget pays for.
class Resolver {
 public:
  Resolver(YAML::Node root, const KeyLocator& where, const YamlLimits& limits)
      : root_(root), where_(where), limits_(limits) {}

  Status Node(YAML::Node node, const std::string& dotted) {
    if (node.IsScalar()) return String(node, dotted);
    if (node.IsMap()) {
      for (auto kv : node) {
        std::string key = kv.first.as<std::string>("");
        TM_RETURN_IF_ERROR(Node(kv.second, dotted.empty() ? key : dotted + "." + key));
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) TM_RETURN_IF_ERROR(Node(node[i], dotted));
    }
    return Status::OK();
  }

 private:
  Status String(YAML::Node node, const std::string& dotted) {
    const std::string s = node.Scalar();
    if (s.find("${") == std::string::npos) return Status::OK();
    if (!in_progress_.insert(dotted).second) {
      return Error(dotted, "refers to itself through ${...} interpolation; break the cycle");
    }
    if (static_cast<int>(in_progress_.size()) > limits_.max_reference_chain) {
      return Error(dotted, "is reached through a chain of more than " + std::to_string(limits_.max_reference_chain) +
                               " ${...} references (the limit); fix: refer to the final value directly");
    }
    std::string out;
    bool whole = false;
    YAML::Node whole_value;
    for (size_t pos = 0; pos < s.size();) {
      size_t start = s.find("${", pos);
      if (start == std::string::npos) {
        out += s.substr(pos);
        break;
      }
      size_t end = s.find('}', start);
      if (end == std::string::npos) {
        return Error(dotted, ": " + Quote(s) + " has an unclosed ${; write ${other.key}", /*sep=*/"");
      }
      out += s.substr(pos, start - pos);
      std::string ref = s.substr(start + 2, end - start - 2);
      if (++refs_ > limits_.max_interpolation_refs) {
        return Error(dotted, "makes the config substitute more than " + std::to_string(limits_.max_interpolation_refs) +
                                 " ${...} references in all (the limit); fix: refer to fewer keys");
      }
      size_t colon = ref.find(':');
      if (colon != std::string::npos) {
        // OmegaConf resolvers (${eval:...}, ${oc.env:...}) run code or read the environment; configs here are
        // data only.
        return Error(dotted, "uses the ${" + ref.substr(0, colon) +
                                 ":...} interpolation resolver, which tune-matrix does not support (a config never "
                                 "runs code); write the value itself, or refer to another key as ${other.key}");
      }
      YAML::Node target = Find(ref);
      if (!target.IsDefined()) {
        std::string hint = ClosestMatch(ref, TopLevelKeys());
        return Error(dotted, "refers to ${" + ref + "}, which is not in the config" +
                                 (hint.empty() ? "" : "; did you mean ${" + hint + "}?"));
      }
      TM_RETURN_IF_ERROR(Node(target, ref));
      whole = start == 0 && end + 1 == s.size();
      if (whole) {
        nodes_ += CountNodes(target);
        if (nodes_ > limits_.max_nodes) {
          return Error(dotted, "makes ${...} references copy more than " + std::to_string(limits_.max_nodes) +
                                   " values in all (the limit: keys that refer to keys that each refer to several "
                                   "others grow exponentially); fix: refer to fewer keys");
        }
        whole_value = CopyTree(target);
      } else if (target.IsScalar()) {
        out += target.Scalar();
      } else {
        return Error(dotted, "embeds ${" + ref + "}, which is " + DescribeNode(target) +
                                 "; only plain values can be embedded in a string");
      }
      if (bytes_ + static_cast<int64_t>(out.size()) > limits_.max_interpolated_bytes) {
        return Error(dotted, "makes ${...} interpolation produce more than " +
                                 std::to_string(limits_.max_interpolated_bytes) +
                                 " bytes in all (the limit: keys that refer to keys that each refer to several "
                                 "others grow exponentially); fix: refer to fewer keys");
      }
      pos = end + 1;
    }
    in_progress_.erase(dotted);
    if (whole) {
      node = whole_value;
    } else {
      bytes_ += static_cast<int64_t>(out.size());
      node = out;
    }
    return Status::OK();
  }

  YAML::Node Find(const std::string& dotted) const {
    YAML::Node cur;
    cur.reset(root_);
    for (const std::string& seg : SplitKeyPath(dotted)) {
      if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
      bool found = false;
      YAML::Node next;
      for (auto kv : cur) {
        if (!found && kv.first.IsScalar() && kv.first.Scalar() == seg) {
          next.reset(kv.second);
          found = true;
        }
      }
      if (!found) return YAML::Node(YAML::NodeType::Undefined);
      cur.reset(next);
    }
    return cur;
  }

  std::vector<std::string> TopLevelKeys() const {
    std::vector<std::string> keys;
    if (!root_.IsMap()) return keys;
    for (const auto& kv : root_) keys.push_back(kv.first.as<std::string>(""));
    return keys;
  }

  Status Error(const std::string& dotted, const std::string& problem, const char* sep = " ") const {
    return Status::InvalidArgument(where_(dotted) + ": key " + Quote(dotted) + sep + problem);
  }

  YAML::Node root_;
  const KeyLocator& where_;
  const YamlLimits& limits_;
  std::set<std::string> in_progress_;  // keys being resolved, to find cycles
  int64_t bytes_ = 0;
  int64_t refs_ = 0;
  int64_t nodes_ = 0;
};

}  // namespace

Status ResolveReferences(YAML::Node root, const KeyLocator& where, const YamlLimits& limits) {
  return Resolver(root, where, limits).Node(root, "");
}

}  // namespace tmx
