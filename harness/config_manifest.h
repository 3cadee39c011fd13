// The manifest of built-in configs (configs/MANIFEST): each config's name, recipe and where its file comes
// from. The registry takes each recipe's configs from it and scripts/make_builtin_configs.py what to write,
// so a config's name is written in one place besides its file.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

struct ManifestEntry {
  std::string name;    // "llama3_2/1B_lora_single_device": the file configs/<name>.yaml
  std::string recipe;  // "lora_finetune_single_device"
  // Where the file comes from: kTorchtune (the script writes it from torchtune's config `torchtune_name`),
  // kTiny (the script writes it from the tiny preset of `tiny_family`) or kHand (written by hand).
  enum class Source { kTorchtune, kTiny, kHand };
  Source source = Source::kHand;
  std::string torchtune_name;  // kTorchtune only
  std::string tiny_family;     // kTiny only
  int line = 0;                // 1-based line in the manifest
};

// Parses manifest text: one `name recipe source` line per config ('#' starts a comment; blank lines are
// skipped), source one of `torchtune`, `torchtune:NAME`, `tiny:FAMILY`, `hand`. Errors name `file`, the
// line and the problem: a wrong number of columns, an unknown source, a name that is not a relative path
// of [A-Za-z0-9._-] parts, a name listed twice.
StatusOr<std::vector<ManifestEntry>> ParseConfigManifest(const std::string& text, const std::string& file);

// configs/MANIFEST as it was when this program was built (compiled in; editing the file reconfigures).
// Throws std::logic_error if it does not parse: the build ships a broken manifest.
const std::vector<ManifestEntry>& BuiltinConfigManifest();

// The names the manifest lists for `recipe`, in manifest order.
std::vector<std::string> ManifestConfigsOf(const std::vector<ManifestEntry>& manifest, const std::string& recipe);

}  // namespace tmx
