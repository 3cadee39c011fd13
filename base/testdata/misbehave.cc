// A child process that misbehaves on request, for the subprocess and runner tests.
//
//   misbehave ok            prints a line to stdout and one to stderr, exits 0
//   misbehave exit N        exits with code N
//   misbehave crash         raises SIGSEGV
//   misbehave abort         calls abort() (SIGABRT)
//   misbehave hang          starts a grandchild that hangs, prints "grandchild <pid>", hangs
//   misbehave alloc MB      allocates and touches MB megabytes, prints "allocated", hangs
//   misbehave garbage       prints binary junk and very long lines, then "END-OF-GARBAGE", exits 3
//   misbehave spew N        prints "line 0" ... "line N-1"
//   misbehave env NAME      prints NAME's value, or "<unset>"
//   misbehave envs NAME...  prints "NAME=value" (or "NAME=<unset>") for each, on one line in one write
//   misbehave pwd           prints the current directory
//   misbehave ignore-term   ignores SIGTERM, prints "ignoring SIGTERM", hangs
//   misbehave stdin         reads stdin to its end and prints how many bytes it got
//   misbehave sleep S       sleeps S seconds (no grandchild), prints "slept", exits 0
//   misbehave pidfile PATH  writes its pid to PATH, then sleeps until killed
//   misbehave spin S        computes until it has used S seconds of CPU (a decimal), prints "spun", exits 0
#include <signal.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// Under AddressSanitizer (scripts/sanitize.sh) the crash must stay a plain SIGSEGV for the tests to see:
// leave that signal to the kernel instead of ASan's report-and-abort.
extern "C" const char* __asan_default_options() { return "handle_segv=0"; }

namespace {

double CpuNow() {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

[[noreturn]] void HangForever() {
  for (;;) pause();
}

void NoCoreDumps() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

int Usage() {
  std::fprintf(stderr, "usage: misbehave ok|exit N|crash|abort|hang|alloc MB|garbage|spew N|env NAME|envs NAME...|pwd|"
                       "ignore-term|stdin|sleep S|pidfile PATH\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  const char* arg = argc > 2 ? argv[2] : nullptr;

  if (mode == "ok") {
    std::printf("hello from stdout\n");
    std::fflush(stdout);
    std::fprintf(stderr, "hello from stderr\n");
    return 0;
  }
  if (mode == "exit" && arg) return std::atoi(arg);
  if (mode == "crash") {
    NoCoreDumps();
    raise(SIGSEGV);
    return 1;
  }
  if (mode == "abort") {
    NoCoreDumps();
    std::abort();
  }
  if (mode == "hang") {
    const pid_t child = fork();
    if (child == 0) HangForever();
    std::printf("grandchild %d\n", static_cast<int>(child));
    std::fflush(stdout);
    HangForever();
  }
  if (mode == "alloc" && arg) {
    const size_t bytes = static_cast<size_t>(std::atol(arg)) << 20;
    char* block = static_cast<char*>(std::malloc(bytes));
    if (!block) return 1;
    for (size_t i = 0; i < bytes; i += 4096) block[i] = 1;
    std::printf("allocated\n");
    std::fflush(stdout);
    HangForever();
  }
  if (mode == "garbage") {
    std::string junk;
    for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>(i & 0xff));
    for (int i = 0; i < 16; ++i) std::fwrite(junk.data(), 1, junk.size(), stdout);
    const std::string long_line(200000, 'x');
    for (int i = 0; i < 3; ++i) {
      std::fwrite(long_line.data(), 1, long_line.size(), stdout);
      std::fputc('\n', stdout);
    }
    std::fwrite("\xff\xfe\xc3(\xed\xa0\x80", 1, 7, stderr);
    std::fflush(stderr);
    std::printf("END-OF-GARBAGE\n");
    return 3;
  }
  if (mode == "spew" && arg) {
    const long n = std::atol(arg);
    for (long i = 0; i < n; ++i) std::printf("line %ld\n", i);
    return 0;
  }
  if (mode == "env" && arg) {
    const char* value = std::getenv(arg);
    std::printf("%s\n", value ? value : "<unset>");
    return 0;
  }
  if (mode == "envs" && arg) {
    // One write, so that the lines of processes writing to one file at once do not interleave.
    std::string line;
    for (int i = 2; i < argc; ++i) {
      const char* value = std::getenv(argv[i]);
      line += std::string(i > 2 ? " " : "") + argv[i] + "=" + (value ? value : "<unset>");
    }
    line += "\n";
    ssize_t ignored = write(1, line.data(), line.size());
    (void)ignored;
    return 0;
  }
  if (mode == "pwd") {
    char buf[4096];
    if (!getcwd(buf, sizeof buf)) return 1;
    std::printf("%s\n", buf);
    return 0;
  }
  if (mode == "ignore-term") {
    signal(SIGTERM, SIG_IGN);
    std::printf("ignoring SIGTERM\n");
    std::fflush(stdout);
    HangForever();
  }
  if (mode == "stdin") {
    char buf[4096];
    long total = 0;
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0) total += n;
    std::printf("stdin bytes %ld\n", total);
    return 0;
  }
  if (mode == "spin" && arg) {
    const double until = CpuNow() + std::atof(arg);
    volatile unsigned long x = 0;
    while (CpuNow() < until) {
      for (int i = 0; i < 100000; ++i) x = x + static_cast<unsigned long>(i);
    }
    std::printf("spun\n");
    return 0;
  }
  if (mode == "sleep" && arg) {
    sleep(static_cast<unsigned>(std::atoi(arg)));
    std::printf("slept\n");
    return 0;
  }
  if (mode == "pidfile" && arg) {  // writes its pid to the file `arg` names, then sleeps until killed
    if (FILE* f = std::fopen(arg, "w")) {
      std::fprintf(f, "%d\n", static_cast<int>(getpid()));
      std::fclose(f);
    }
    for (;;) pause();
  }
  return Usage();
}
