// ${dotted.key} interpolation of a config's values, bounded so that keys referring to keys that each refer to
// several others (a fan-out that doubles the output at every level) stop at a limit instead of exhausting
// memory.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>

#include "base/status.h"
#include "harness/yaml_bounds.h"

namespace tmx {

// Where the value of a dotted key was written, e.g. "configs/a.yaml:3:7" or "override 'lr=${x}'".
using KeyLocator = std::function<std::string(const std::string& dotted)>;

// Replaces ${dotted.key} in every string value under `root` with that key's value, in place. A string that is
// exactly one reference takes the referenced value itself (a number, a list, a mapping), resolved first.
// InvalidArgument, naming the key through `where`, for an unknown key, an unclosed ${, a list or mapping
// embedded in a longer string, a cycle, and for going past `limits` (bytes produced, references substituted,
// nodes copied by whole references, length of a chain of references).
// REQUIRES: `root` is a tree (no shared or cyclic nodes; see CopyTree).
Status ResolveReferences(YAML::Node root, const KeyLocator& where, const YamlLimits& limits = {});

}  // namespace tmx
