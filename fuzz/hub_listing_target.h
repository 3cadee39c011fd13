// The fuzz target for what `tune download` reads from a Hub (harness/hub_listing.h): a tree listing page, and
// the same bytes as a Link header, a URL and a repo id. Only harness/hub_listing.cc and tm_base under it, so
// that the libFuzzer build (fuzz/libfuzzer_hub_listing.cc) compiles little.
#pragma once

#include <string>
#include <vector>

namespace tmx::fuzz {

// Runs one input; aborts (a finding) when an invariant breaks: a path CheckRepoPath accepts that could leave
// the output folder or land in a .git folder, a printed name or URL with a control character or a password,
// an origin that is not scheme://host:port. Returns whether the input parsed as a listing.
bool RunHubListing(const std::string& input);

// Tokens for the mutator: the listing's keys, control folders, escapes, URL parts.
std::vector<std::string> HubListingDictionary();

// Hand-made listings (the Hub's shape, LFS entries, hostile names) and Link headers.
std::vector<std::string> HubListingSeeds();

}  // namespace tmx::fuzz
