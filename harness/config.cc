#include "harness/config.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/text.h"
#include "harness/interpolate.h"
#include "harness/yaml_bounds.h"

namespace tmx {
namespace {

Origin OriginFromMark(const std::string& file, const YAML::Mark& mark) {
  Origin o;
  o.file = file;
  if (!mark.is_null()) {
    o.line = mark.line + 1;
    o.column = mark.column + 1;
  }
  return o;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

bool IsValidKeySegment(const std::string& seg) {
  if (seg.empty()) return false;
  for (char c : seg) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

// Rejects duplicate keys anywhere in the document (yaml-cpp would silently keep both).
Status CheckDuplicateKeys(const YAML::Node& node, const std::string& prefix, const std::string& path) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      std::string dotted = prefix.empty() ? key : prefix + "." + key;
      if (!kv.first.IsScalar()) {
        return Status::InvalidArgument(OriginFromMark(path, kv.first.Mark()).ToString() +
                                       ": keys must be plain names, not collections");
      }
      if (!seen.insert(key).second) {
        return Status::InvalidArgument(OriginFromMark(path, kv.first.Mark()).ToString() + ": key " +
                                       Quote(dotted) + " appears twice; keep one of them");
      }
      TM_RETURN_IF_ERROR(CheckDuplicateKeys(kv.second, dotted, path));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) TM_RETURN_IF_ERROR(CheckDuplicateKeys(item, prefix, path));
  }
  return Status::OK();
}

// Parses the right-hand side of an override as a YAML value, with the same bounds as a config file.
StatusOr<YAML::Node> ParseOverrideValue(const std::string& arg, const std::string& value) {
  if (value == "None" || value == "none") return YAML::Node(YAML::NodeType::Null);
  if (value.empty()) return YAML::Node(std::string());
  size_t value_column = arg.size() - value.size() + 1;  // 1-based column of the value within `arg`
  TM_RETURN_IF_ERROR(CheckYamlBounds(value, [&](const YAML::Mark& mark) {
    return "override " + Quote(arg) + " at column " + std::to_string(value_column + std::max(mark.column, 0));
  }));
  try {
    YAML::Node node = YAML::Load(value);
    if (!node.IsDefined()) return YAML::Node(std::string());
    return CopyTree(node);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("override " + Quote(arg) + ": the value is not valid YAML (" + e.msg +
                                   "); quote it or fix the brackets, e.g. lora_attn_modules=[q_proj,v_proj]");
  }
}

bool Contains(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) return false;
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return true;
  }
  return false;
}

std::vector<std::string> KeysOf(const YAML::Node& map) {
  std::vector<std::string> keys;
  if (map.IsMap()) {
    for (const auto& kv : map) keys.push_back(kv.first.as<std::string>(""));
  }
  return keys;
}

}  // namespace

std::string Origin::ToString() const {
  if (!override_arg.empty()) return "override " + Quote(override_arg);
  if (!default_of.empty()) return "default of " + default_of;
  std::string s = file.empty() ? "<config>" : file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  return s;
}

std::vector<std::string> SplitKeyPath(const std::string& dotted) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : dotted) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

bool IsComponentNode(const YAML::Node& node) { return node.IsMap() && Contains(node, "_component_"); }

std::string DescribeNode(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

void RecordMarks(const YAML::Node& node, const std::string& prefix, std::map<std::string, YAML::Mark>* values,
                 std::map<std::string, YAML::Mark>* keys) {
  (*values)[prefix] = node.Mark();
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    std::string dotted = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    (*keys)[dotted] = kv.first.Mark();
    RecordMarks(kv.second, dotted, values, keys);
  }
}

Config::Config(const Config& other)
    : root_(YAML::Clone(other.root_)),
      path_(other.path_),
      overrides_(other.overrides_),
      defaults_(other.defaults_),
      value_marks_(other.value_marks_),
      key_marks_(other.key_marks_) {}

Config& Config::operator=(const Config& other) {
  if (this != &other) {
    root_ = YAML::Node();  // detach before assigning: yaml-cpp's operator= would write through
    root_.reset(YAML::Clone(other.root_));
    path_ = other.path_;
    overrides_ = other.overrides_;
    defaults_ = other.defaults_;
    value_marks_ = other.value_marks_;
    key_marks_ = other.key_marks_;
  }
  return *this;
}

StatusOr<Config> Config::FromString(const std::string& text, const std::string& path) {
  Config config;
  config.path_ = path;
  TM_RETURN_IF_ERROR(
      CheckYamlBounds(text, [&](const YAML::Mark& mark) { return OriginFromMark(path, mark).ToString(); }));
  try {
    config.root_ = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(OriginFromMark(path, e.mark).ToString() + ": malformed YAML: " + e.msg +
                                   "; fix the file's indentation or brackets at that position");
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(path + ": cannot read YAML: " + e.msg);
  }
  if (!config.root_.IsDefined() || config.root_.IsNull()) {
    return Status::InvalidArgument(path + ": the config is empty; it must be a mapping of keys to values");
  }
  if (!config.root_.IsMap()) {
    return Status::InvalidArgument(OriginFromMark(path, config.root_.Mark()).ToString() +
                                   ": the top level must be a mapping of keys to values, not " +
                                   DescribeNode(config.root_));
  }
  TM_RETURN_IF_ERROR(CheckDuplicateKeys(config.root_, "", path));
  RecordMarks(config.root_, "", &config.value_marks_, &config.key_marks_);
  // Marks are recorded; now give every alias its own nodes, so an override of one place changes only it.
  config.root_.reset(CopyTree(config.root_));
  return config;
}

StatusOr<Config> Config::LoadFile(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path, ConfigInput());
  if (!text.ok()) return text.status();
  return FromString(*text, path);
}

namespace {

// One key=value (set) or ~key (remove) override, its key split into checked segments.
struct Override {
  std::string arg;  // as written
  std::string key;
  bool remove = false;
  std::vector<std::string> segs;
};

StatusOr<Override> ParseOverride(const std::string& arg) {
  Override o;
  o.arg = arg;
  o.remove = !arg.empty() && arg[0] == '~';
  const size_t eq = arg.find('=');
  o.key = o.remove ? arg.substr(1) : arg.substr(0, eq);
  if (!o.remove && eq == std::string::npos) {
    return Status::InvalidArgument("override " + Quote(arg) +
                                   ": expected key=value (or ~key to remove a key), e.g. device=cpu");
  }
  if (o.remove && eq != std::string::npos) {
    return Status::InvalidArgument("override " + Quote(arg) + ": ~key removes a key and takes no value");
  }
  o.segs = SplitKeyPath(o.key);
  if (static_cast<int>(o.segs.size()) > YamlLimits().max_depth) {
    return Status::InvalidArgument("override " + Quote(arg) + ": the key path has more than " +
                                   std::to_string(YamlLimits().max_depth) +
                                   " parts (the nesting limit); use a shorter key path");
  }
  for (const std::string& seg : o.segs) {
    if (!IsValidKeySegment(seg)) {
      return Status::InvalidArgument("override " + Quote(arg) + ": " + Quote(o.key) +
                                     " is not a key path; use names joined by dots, e.g. model.lora_rank=16");
    }
  }
  return o;
}

// The override's last segment in `parent` (`here`: its dotted path): removed, or set (a component's name where
// a bare name replaces a component).
Status ApplyLast(YAML::Node parent, const Override& o, const std::string& here) {
  const std::string& seg = o.segs.back();
  if (o.remove) {
    if (!Contains(parent, seg)) {
      std::string hint = ClosestMatch(seg, KeysOf(parent));
      return Status::InvalidArgument("override " + Quote(o.arg) + ": there is no key " + Quote(here) + " to remove" +
                                     (hint.empty() ? "" : "; did you mean " + Quote(hint) + "?"));
    }
    if (IsComponentNode(parent[seg])) {
      return Status::InvalidArgument("override " + Quote(o.arg) + ": " + Quote(here) +
                                     " is a component and cannot be removed; replace it with " + here +
                                     "=<component name>");
    }
    parent.remove(seg);
    return Status::OK();
  }
  StatusOr<YAML::Node> value = ParseOverrideValue(o.arg, o.arg.substr(o.arg.find('=') + 1));
  if (!value.ok()) return value.status();
  if (Contains(parent, seg) && IsComponentNode(parent[seg]) && value->IsScalar()) {
    parent[seg]["_component_"] = value->Scalar();
  } else {
    parent[seg] = *value;
  }
  return Status::OK();
}

// Walks `o`'s path from segment `i` of `parent` to the mapping that holds its last one, creating mappings for a
// set (a null in the way becomes one), and applies it there.
Status ApplyFrom(YAML::Node parent, const Override& o, size_t i) {
  const std::string& seg = o.segs[i];
  const std::string here =
      JoinStrings(std::vector<std::string>(o.segs.begin(), o.segs.begin() + static_cast<std::ptrdiff_t>(i) + 1), ".");
  if (i + 1 == o.segs.size()) return ApplyLast(parent, o, here);
  if (!Contains(parent, seg)) {
    if (o.remove) return Status::InvalidArgument("override " + Quote(o.arg) + ": there is no key " + Quote(here));
    parent[seg] = YAML::Node(YAML::NodeType::Map);
  }
  YAML::Node child = parent[seg];
  if (!child.IsMap()) {
    if (!child.IsNull() || o.remove) {
      return Status::InvalidArgument("override " + Quote(o.arg) + ": cannot set " + Quote(o.key) + " because " +
                                     Quote(here) + " is " + DescribeNode(child) + ", not a mapping");
    }
    parent[seg] = YAML::Node(YAML::NodeType::Map);
    child.reset(parent[seg]);
  }
  return ApplyFrom(child, o, i + 1);
}

}  // namespace

Status Config::ApplyOverrides(const std::vector<std::string>& args) {
  YAML::Node root = YAML::Clone(root_);
  std::map<std::string, std::string> overrides = overrides_;
  for (const std::string& arg : args) {
    StatusOr<Override> o = ParseOverride(arg);
    if (!o.ok()) return o.status();
    TM_RETURN_IF_ERROR(ApplyFrom(root, *o, 0));
    // The override replaces the ones it covers (itself or a key below it).
    for (auto it = overrides.begin(); it != overrides.end();) {
      if (it->first == o->key || it->first.rfind(o->key + ".", 0) == 0) {
        it = overrides.erase(it);
      } else {
        ++it;
      }
    }
    if (!o->remove) overrides[o->key] = arg;
  }
  root_.reset(root);
  overrides_ = std::move(overrides);
  return Status::OK();
}

Status Config::ResolveInterpolations() {
  return ResolveReferences(root_, [this](const std::string& dotted) { return OriginOf(dotted).ToString(); });
}

YAML::Node Config::Find(const std::string& dotted) const {
  YAML::Node cur;
  cur.reset(root_);
  for (const std::string& seg : SplitKeyPath(dotted)) {
    if (!cur.IsMap() || !Contains(cur, seg)) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node next = cur[seg];
    cur.reset(next);
  }
  return cur;
}

Origin Config::OriginOf(const std::string& dotted) const {
  for (std::string key = dotted;;) {
    auto it = overrides_.find(key);
    if (it != overrides_.end()) {
      Origin o;
      o.override_arg = it->second;
      return o;
    }
    auto def = defaults_.find(key);
    if (def != defaults_.end()) {
      Origin o;
      o.default_of = def->second;
      return o;
    }
    size_t dot = key.rfind('.');
    if (dot == std::string::npos) break;
    key = key.substr(0, dot);
  }
  // A section the file lacks, made by overrides of its keys (profiler.enabled=True): the first such override.
  if (!dotted.empty() && value_marks_.count(dotted) == 0) {
    for (const auto& [key, arg] : overrides_) {
      if (key.rfind(dotted + ".", 0) == 0) {
        Origin o;
        o.override_arg = arg;
        return o;
      }
    }
  }
  for (std::string key = dotted;;) {
    auto it = value_marks_.find(key);
    if (it != value_marks_.end() && (key.empty() || Find(key).IsDefined())) return OriginFromMark(path_, it->second);
    if (key.empty()) break;
    size_t dot = key.rfind('.');
    key = dot == std::string::npos ? "" : key.substr(0, dot);
  }
  return OriginFromMark(path_, YAML::Mark::null_mark());
}

Origin Config::KeyOriginOf(const std::string& dotted) const {
  auto it = key_marks_.find(dotted);
  if (overrides_.count(dotted) || it == key_marks_.end()) return OriginOf(dotted);
  return OriginFromMark(path_, it->second);
}

namespace {

template <typename T>
StatusOr<T> GetTyped(const Config& c, const std::string& dotted, T fallback, const char* what) {
  YAML::Node node = c.Find(dotted);
  if (!node.IsDefined() || node.IsNull()) return fallback;
  if (node.IsScalar()) {
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
    }
  }
  return Status::InvalidArgument(c.OriginOf(dotted).ToString() + ": key '" + dotted + "': expected " + what +
                                 ", got " + DescribeNode(node));
}

}  // namespace

StatusOr<std::string> Config::GetString(const std::string& dotted, const std::string& fallback) const {
  return GetTyped<std::string>(*this, dotted, fallback, "a string");
}
StatusOr<int64_t> Config::GetInt(const std::string& dotted, int64_t fallback) const {
  return GetTyped<int64_t>(*this, dotted, fallback, "an integer");
}
StatusOr<double> Config::GetDouble(const std::string& dotted, double fallback) const {
  return GetTyped<double>(*this, dotted, fallback, "a number");
}
StatusOr<bool> Config::GetBool(const std::string& dotted, bool fallback) const {
  return GetTyped<bool>(*this, dotted, fallback, "True or False");
}

namespace {

template <typename T>
StatusOr<T> GetRequired(const Config& c, const std::string& dotted, const char* what) {
  YAML::Node node = c.Find(dotted);
  if (!node.IsDefined()) {
    return Status::InvalidArgument(c.OriginOf(dotted).ToString() + ": key '" + dotted + "' is missing; set it to " +
                                   what);
  }
  return GetTyped<T>(c, dotted, T(), what);
}

}  // namespace

StatusOr<std::string> Config::GetString(const std::string& dotted) const {
  return GetRequired<std::string>(*this, dotted, "a string");
}
StatusOr<int64_t> Config::GetInt(const std::string& dotted) const {
  return GetRequired<int64_t>(*this, dotted, "an integer");
}
StatusOr<double> Config::GetDouble(const std::string& dotted) const {
  return GetRequired<double>(*this, dotted, "a number");
}
StatusOr<bool> Config::GetBool(const std::string& dotted) const {
  return GetRequired<bool>(*this, dotted, "True or False");
}

StatusOr<std::vector<std::string>> Config::GetStringList(const std::string& dotted) const {
  YAML::Node node = Find(dotted);
  if (!node.IsDefined()) {
    return Status::InvalidArgument(OriginOf(dotted).ToString() + ": key '" + dotted +
                                   "' is missing; set it to a list such as [q_proj, v_proj]");
  }
  std::vector<std::string> out;
  if (node.IsNull()) return out;
  if (node.IsSequence()) {
    for (const auto& item : node) {
      if (!item.IsScalar()) break;
      out.push_back(item.Scalar());
    }
    if (out.size() == node.size()) return out;
  }
  return Status::InvalidArgument(OriginOf(dotted).ToString() + ": key '" + dotted +
                                 "': expected a list of strings, got " + DescribeNode(node));
}

bool Config::SetDefault(const std::string& dotted, const YAML::Node& value, const std::string& owner) {
  std::vector<std::string> segs = SplitKeyPath(dotted);
  YAML::Node cur;
  cur.reset(root_);
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    if (!cur.IsMap()) return false;
    if (!Contains(cur, segs[i])) cur[segs[i]] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = cur[segs[i]];
    cur.reset(next);
  }
  if (!cur.IsMap() || Contains(cur, segs.back())) return false;
  cur[segs.back()] = YAML::Clone(value);
  defaults_[dotted] = owner;
  return true;
}

bool Config::IsNull(const std::string& dotted) const {
  YAML::Node node = Find(dotted);
  return !node.IsDefined() || node.IsNull();
}

std::string Config::ToYaml() const {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out << root_;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tmx
