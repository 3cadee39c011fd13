// tm_fuzz: runs the fuzz targets for a while and says how many inputs it tried.
//
//   tm_fuzz [--target all|config|override|journal|writeback|safetensors|dataset|
//           tokenizer_json|sentencepiece_model] [--seconds S] [--max-inputs N] [--seed N]
//           [--crash-dir DIR] [--source-dir DIR] [--input FILE]
//
// The time and the input count are shared out evenly between the targets. --input runs one file (a crash
// folder's input, say) through the targets instead, and prints how long each took. Exit 0 when no input crashed,
// hung or broke an invariant (any of those ends the process with a message naming the input), 2 for bad
// arguments.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/text.h"
#include "fuzz/fuzzer.h"
#include "fuzz/targets.h"

namespace {

// An input that makes the code under test allocate without end must fail (bad_alloc, then abort: reported
// with the input) rather than take the machine's memory. AddressSanitizer reserves terabytes of address
// space, so under it the limit is ASan's own hard_rss_limit_mb (scripts/fuzz.sh sets it).
void LimitMemory(uint64_t megabytes) {
#if defined(__SANITIZE_ADDRESS__)
  (void)megabytes;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  (void)megabytes;
#else
  rlimit limit{megabytes << 20, megabytes << 20};
  ::setrlimit(RLIMIT_AS, &limit);
#endif
#else
  rlimit limit{megabytes << 20, megabytes << 20};
  ::setrlimit(RLIMIT_AS, &limit);
#endif
}

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "tm_fuzz: %s\nusage: tm_fuzz [--target all|config|override|journal|writeback|safetensors|dataset|"
               "tokenizer_json|sentencepiece_model] [--seconds S] "
               "[--max-inputs N] [--seed N] [--crash-dir DIR] [--source-dir DIR] [--input FILE]\n",
               problem.c_str());
  return 2;
}

bool ParseNumber(const std::string& text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && end != nullptr && *end == '\0' && *out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_name = "all";
  std::string source_dir = TM_SOURCE_DIR;
  std::string input_file;
  tmx::fuzz::FuzzOptions options;
  options.seconds = 60;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("missing the value of " + flag);
    std::string value = argv[++i];
    double number = 0;
    if (flag == "--target") {
      target_name = value;
    } else if (flag == "--source-dir") {
      source_dir = value;
    } else if (flag == "--input") {
      input_file = value;
    } else if (flag == "--crash-dir") {
      options.crash_dir = value;
    } else if (ParseNumber(value, &number) && flag == "--seconds") {
      options.seconds = number;
    } else if (ParseNumber(value, &number) && flag == "--max-inputs") {
      options.max_inputs = static_cast<int64_t>(number);
    } else if (ParseNumber(value, &number) && flag == "--seed") {
      options.seed = static_cast<uint64_t>(number);
    } else {
      return Usage("unknown option or bad value: " + flag + " " + value);
    }
  }
  LimitMemory(4096);
  std::vector<tmx::fuzz::FuzzTarget> targets;
  std::vector<std::string> names;
  for (tmx::fuzz::FuzzTarget& t : tmx::fuzz::AllTargets()) {
    names.push_back(t.name);
    if (target_name == "all" || target_name == t.name) targets.push_back(std::move(t));
  }
  if (targets.empty()) {
    std::string hint = tmx::ClosestMatch(target_name, names);
    return Usage("unknown target '" + target_name + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }
  if (!input_file.empty()) {
    tmx::StatusOr<std::string> input = tmx::ReadFile(input_file);
    if (!input.ok()) return Usage(input.status().message());
    for (const tmx::fuzz::FuzzTarget& t : targets) {
      auto start = std::chrono::steady_clock::now();
      bool accepted = t.run(input->substr(0, t.max_size));
      std::printf("tm_fuzz: %-9s %s in %.3f s\n", t.name.c_str(), accepted ? "accepted" : "refused",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return 0;
  }
  double share = options.seconds / static_cast<double>(targets.size());
  int64_t total = 0;
  for (const tmx::fuzz::FuzzTarget& t : targets) {
    tmx::StatusOr<std::vector<std::string>> seeds = tmx::fuzz::SeedCorpus(t.name, source_dir);
    if (!seeds.ok()) return Usage(seeds.status().message());
    tmx::fuzz::FuzzOptions per_target = options;
    per_target.seconds = share;
    if (options.max_inputs >= 0) per_target.max_inputs = options.max_inputs / static_cast<int64_t>(targets.size());
    tmx::fuzz::FuzzStats stats = tmx::fuzz::Fuzz(t, *seeds, per_target);
    std::printf("tm_fuzz: %-8s %lld inputs (%lld accepted, %zu seeds) in %.1f s, no crash\n", t.name.c_str(),
                static_cast<long long>(stats.inputs), static_cast<long long>(stats.accepted), seeds->size(),
                stats.seconds);
    std::fflush(stdout);
    total += stats.inputs;
  }
  std::printf("tm_fuzz: %lld inputs tried in all (seed %llu), no crash, hang or broken invariant\n",
              static_cast<long long>(total), static_cast<unsigned long long>(options.seed));
  return 0;
}
