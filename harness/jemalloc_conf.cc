// jemalloc's settings for a process that trains (`tune`, and the benchmarks that time its kernels), linked into
// it by tm_training_allocator (cmake/TuneMatrixTargets.cmake) only where it allocates through jemalloc. jemalloc
// reads this symbol itself at start-up; $MALLOC_CONF still wins.
//
// Freed pages are kept for the next step rather than returned to the kernel after 10 s. With steps longer than
// that, the default decay returned them between steps and every step faulted them in again (1B LoRA on the
// CPU: 26 s a step instead of 19 s; benchmarks/README.md).
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
