// FindComponent: the one lookup of a torchtune component by dotpath or short name, shared by the tokenizer and
// dataset tables. Torch-free, header-only.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "base/text.h"

namespace tmx::data {

// The entry of `table` (items with `name` and `dotpath`) that `component` names; NotFound "<what> component <x> is
// unknown (did you mean <closest>?); fix: use one of: <dotpaths>" otherwise.
template <typename Component>
StatusOr<Component> FindComponent(const std::vector<Component>& table, const std::string& component,
                                  const std::string& what) {
  std::vector<std::string> names;
  for (const Component& c : table) {
    if (component == c.name || component == c.dotpath) return c;
    names.push_back(c.dotpath);
  }
  std::string message = what + " component " + component + " is unknown";
  std::string close = ClosestMatch(component, names);
  if (!close.empty()) message += " (did you mean " + close + "?)";
  return Status::NotFound(message + "; fix: use one of: " + JoinStrings(names, ", "));
}

}  // namespace tmx::data
