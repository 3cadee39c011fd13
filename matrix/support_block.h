// The generated support block inside a config file, and writing it back: a block at the end of each config
// file, between a BEGIN and an END comment line, holding `metadata.supported_devices` and
// `metadata.support.<column>` (harness/column.h: "cpu (amx, torch 2.11.0)"; a block written before columns, keyed
// by device type, reads as the columns its entries' fields name, and is written again keyed by them). Every byte
// outside the block belongs to the user and is kept exactly.
//
// The markers, finding the block and the config's hash outside it are harness/config_block.h's.
//
// Layout contract (what StripGeneratedBlock undoes):
//   rendered = stripped + separator + block
// where `separator` is empty when `stripped` is empty or ends with a line break, and otherwise one line
// break that the block owns; the END line then says so ("config has no final newline"), which is how
// stripping knows to remove it again. So StripGeneratedBlock(RenderWithSupport(x)) == StripGeneratedBlock(x)
// and rendering twice equals rendering once. The block uses the line ending of the config's first line
// (CRLF or LF). A block found elsewhere than at the end (the user appended lines after it) is accepted; it is
// taken out where it is and written again at the end, the user's lines keeping their order and bytes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config_block.h"
#include "harness/device_types.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {

// Column ("cpu (amx, torch 2.11.0)", "cuda (torch 2.11.0)") -> its entry, as a block holds them.
using SupportEntries = std::map<std::string, SupportEntry>;

// What the block in `text` claims, as a ConfigSupport whose block fields are set (supported_devices,
// entries and their lines); the same errors as ReadSupportEntries.
StatusOr<ConfigSupport> ReadConfigSupport(const std::string& text, const std::string& path);

// The support entries of the block in `text` (empty if it has none). A damaged block (BEGIN without END, END
// without BEGIN, two blocks, invalid YAML or wrongly typed values inside) is an InvalidArgument error
// "<path>:<line>: ...".
StatusOr<SupportEntries> ReadSupportEntries(const std::string& text, const std::string& path);

// `text` with its block replaced by one rendering `support` (no block at all when `support` is empty), each
// entry's torch axis (torch_versions, min_torch) set from the entries of its device column (AddTorchSummaries).
// Deterministic: columns in OrderColumns order (keys double-quoted), fixed field order, numbers rounded (tokens/s to
// 0.1, step time to 4 significant digits, peak memory to 0.001 GiB, trailing zeros dropped), strings
// double-quoted and escaped with line breaks collapsed to spaces. Errors, naming "<path>:<line>": a damaged
// block; a config that is not valid YAML, not one block-style mapping, or ends its document with `...`; a
// top-level `metadata` key outside the block; a key that is not a column (ParseColumnKey), or a status that is
// none.
StatusOr<std::string> RenderWithSupport(const std::string& text, const SupportEntries& support,
                                        const std::string& path);

// `text` with the entries of the columns in `updates` replaced (others stay as they are), rendered as
// RenderWithSupport does.
StatusOr<std::string> UpdateSupport(const std::string& text, const SupportEntries& updates,
                                    const std::string& path);

// Reads `path`, replaces the entries of the columns in `updates` (others stay as they are), renders and
// replaces the file atomically if and only if its bytes change. `changed` (may be null) says whether it was
// written. On error nothing is written.
Status WriteBackSupport(const std::string& path, const SupportEntries& updates, bool* changed);

}  // namespace tmx::matrix
