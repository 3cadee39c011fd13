// `tune tokenize`: what a model is fed. Loads a config's tokenizer (its component, files and options, with
// overrides) and prints a text's token ids and pieces, plain and in the tokenizer's chat format (the text as
// one user turn answered by an empty assistant turn, with torchtune's masking), so a user sees exactly what
// training reads. Lives with the recipes because it builds their tokenizers; `tune` adds it to its table.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/registry.h"

namespace tmx::recipes {

// tune tokenize <config> [key=value ...] [--text TEXT] [--plain | --chat]; without --text the text is read
// from `in`. Exit status 0, or 2 for bad arguments, a bad config or a tokenizer that cannot be loaded.
int Tokenize(const Registry& registry, const std::vector<std::string>& args, std::istream& in, std::ostream& out,
             std::ostream& err);

// The subcommand's table entry (reads standard input).
Subcommand TokenizeSubcommand(const Registry& registry);

}  // namespace tmx::recipes
