// Config: a YAML config in torchtune's schema, with command-line overrides and ${...} interpolation.
//
// Every value remembers where it came from (file:line:column, or the override that set it), so that each
// error can name the file, line and key the user must change.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace tmx {

// Where a config value was written: a position in a file, or a command-line override.
struct Origin {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string override_arg;  // the `key=value` argument, when the value came from the command line
  std::string default_of;    // the schema whose default the value is, when the config left the key out
  // "configs/a.yaml:12:3", "override 'lr=abc'" or "default of recipe 'x'".
  std::string ToString() const;
};

class Config {
 public:
  Config() = default;
  // Copies are deep: yaml-cpp nodes share storage, a Config never does.
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&&) = default;
  Config& operator=(Config&&) = default;

  // Parses `text` as the contents of `path`. Malformed YAML, duplicate keys or a top level that is not a
  // mapping give InvalidArgument naming path:line:column.
  static StatusOr<Config> FromString(const std::string& text, const std::string& path);
  // Reads and parses a file.
  static StatusOr<Config> LoadFile(const std::string& path);

  // Applies torchtune-style overrides in order:
  //   a.b=v      sets a nested key (v is parsed as YAML: 1, 3e-4, True, [q_proj,v_proj], null; None is null)
  //   ~a.b       removes a key (removing a whole component node is refused)
  //   a=<name>   on a component node, replaces its _component_
  // Stops at the first bad argument; the config is unchanged by a failed call.
  Status ApplyOverrides(const std::vector<std::string>& args);

  // Sets `dotted` to `value` when the key is absent (a present key, null included, is kept), recording
  // `owner` (e.g. "recipe 'full_finetune_single_device'") as its origin. The parent must be a mapping or
  // absent (then it is created). Returns whether the key was set.
  bool SetDefault(const std::string& dotted, const YAML::Node& value, const std::string& owner);

  // Replaces ${dotted.key} in every string value with that key's value. A string that is exactly one
  // reference takes the referenced value's type. Unknown keys and cycles are errors naming both keys.
  Status ResolveInterpolations();

  const YAML::Node& root() const { return root_; }
  const std::string& path() const { return path_; }

  // The node at a dotted path ("model.lora_rank"), or an undefined node when absent.
  YAML::Node Find(const std::string& dotted) const;
  // Where the value at `dotted` (or, if absent, its nearest present parent) was written.
  Origin OriginOf(const std::string& dotted) const;
  // Where the key `dotted` itself was written (for "unknown key" messages).
  Origin KeyOriginOf(const std::string& dotted) const;

  // Typed getters. With a fallback, a missing (or null) key gives the fallback; without one, a missing key
  // is an error (recipes read their keys after ApplySchemaDefaults, so every key with a schema default is
  // present). A value of the wrong type is an error naming its origin.
  StatusOr<std::string> GetString(const std::string& dotted, const std::string& fallback) const;
  StatusOr<int64_t> GetInt(const std::string& dotted, int64_t fallback) const;
  StatusOr<double> GetDouble(const std::string& dotted, double fallback) const;
  StatusOr<bool> GetBool(const std::string& dotted, bool fallback) const;
  StatusOr<std::string> GetString(const std::string& dotted) const;
  StatusOr<int64_t> GetInt(const std::string& dotted) const;
  StatusOr<double> GetDouble(const std::string& dotted) const;
  StatusOr<bool> GetBool(const std::string& dotted) const;
  // A list of strings (a missing key is an error; null gives an empty list).
  StatusOr<std::vector<std::string>> GetStringList(const std::string& dotted) const;
  // True when the key is absent or explicitly null.
  bool IsNull(const std::string& dotted) const;

  // The resolved config as YAML text (comments are not kept: this is the value a recipe sees).
  std::string ToYaml() const;

 private:
  YAML::Node root_;
  std::string path_;
  std::map<std::string, std::string> overrides_;  // dotted key -> the argument that set it
  std::map<std::string, std::string> defaults_;   // dotted key -> the schema whose default it holds
  // Positions recorded when the file was parsed (yaml-cpp's marks do not survive copies of nodes).
  std::map<std::string, YAML::Mark> value_marks_;  // "" is the document itself
  std::map<std::string, YAML::Mark> key_marks_;
};

// Splits "a.b.c" into {"a","b","c"}.
std::vector<std::string> SplitKeyPath(const std::string& dotted);

// True for a mapping node with a `_component_` key.
bool IsComponentNode(const YAML::Node& node);

// A human-readable name of a node's YAML kind and value, for "expected X, got Y" messages.
std::string DescribeNode(const YAML::Node& node);

}  // namespace tmx
