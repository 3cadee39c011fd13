// The C library's allocator, set for training: a training step frees and re-allocates the same activation
// and gradient buffers every step. glibc's defaults return every block of 128 KiB or more (a threshold that
// only creeps upward) to the kernel with munmap and trim the heap top beyond 128 KiB, so each step pays page
// faults to map them again: about a fifth of a tiny model's step on the CPU (benchmarks/README.md). `tune` is
// linked with jemalloc where it is installed, which reuses freed pages on its own (and keeps a lower peak);
// this is the fallback for builds without it.
#pragma once

#include <string>

namespace tmx {

struct AllocatorOptions {
  // Blocks below this come from the heap and are reused; larger ones are mapped on demand (glibc caps it at
  // 32 MiB on 64-bit machines). Default: the cap, so every activation of a small model is reused.
  size_t mmap_threshold_bytes = size_t{32} << 20;
  // Free memory at the heap's top kept rather than returned to the kernel. Default 1 GiB: what was freed is
  // soon needed again in the next step. Peak resident memory is not raised by it, only held.
  size_t trim_threshold_bytes = size_t{1} << 30;
};

// Applies `options` with mallopt, unless $GLIBC_TUNABLES already sets a glibc.malloc tunable (the user's
// choice wins). Returns what it did, for logs: "" when it applied them, else the reason it did not.
std::string ConfigureAllocatorForTraining(const AllocatorOptions& options = {});

// Sets up the allocator a training program runs with, before anything allocates, and says which it is (for logs
// and benchmark contexts): jemalloc where the program is linked with it (cmake's tm_training_allocator defines
// TM_WITH_JEMALLOC; its settings are in harness/jemalloc_conf.cc), else glibc's malloc through
// ConfigureAllocatorForTraining. Inline because the choice is each program's, not this library's.
inline std::string PrepareTrainingAllocator() {
#ifdef TM_WITH_JEMALLOC
  return "jemalloc, freed pages kept";
#else
  const std::string not_tuned = ConfigureAllocatorForTraining();
  return not_tuned.empty() ? "glibc malloc, tuned for training" : "glibc malloc, not tuned: " + not_tuned;
#endif
}

}  // namespace tmx
