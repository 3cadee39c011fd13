// libFuzzer's entry for the hub_listing target (fuzz/hub_listing_target.h): coverage-guided, for long runs
// under clang's sanitizers; the seeded fuzzer (tm_fuzz) runs the same target with g++ and in the suite.
// Built with -DTUNE_MATRIX_LIBFUZZER=ON by clang (scripts/fuzz.sh LIBFUZZER=1 does it). With
// TM_WRITE_SEEDS=<dir> in the environment it first writes the hand-made seeds there, one file each.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fuzz/hub_listing_target.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("TM_WRITE_SEEDS"); dir != nullptr && *dir != '\0') {
    int n = 0;
    for (const std::string& seed : tmx::fuzz::HubListingSeeds()) {
      std::ofstream(std::string(dir) + "/seed_" + std::to_string(n++), std::ios::binary) << seed;
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tmx::fuzz::RunHubListing(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
