// What a model is fed, for people: each token's id and piece, and whether it is trained on. The body of `tune
// tokenize` (to be wired by the CLI). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recipes/data/tokenizers/tokenizer.h"

namespace tmx::data {

// One line per token: "<index>\t<id>\t<piece>" with the piece's control characters escaped as \n, \t, \r and
// "<0xAB>" bytes, plus "\tmasked" where mask[i] is true. `mask` is empty or has one entry per id.
std::string DescribeTokens(const Tokenizer& tokenizer, const std::vector<int64_t>& ids,
                           const std::vector<bool>& mask = {});

}  // namespace tmx::data
