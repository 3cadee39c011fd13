// Environment failures: what went wrong with the machine running a cell (a full disk, a read-only or
// unwritable folder, no file descriptors, a program that cannot start) rather than with the config on the
// device. A matrix cell that fails this way must be recorded as an error of the run, never written into a
// config as the device's verdict.
#pragma once

#include <optional>
#include <string>

namespace tmx {

// Where a failure was met.
enum class FailureStage {
  kHarness,  // tune-matrix itself: making folders, writing the journal or a config, fork, pipes
  kExec,     // starting the child program (exec)
  kChild,    // the child's own run, judged from what it printed
};

// Whether errno `err` met at `stage` says the environment failed:
//   any stage:  ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EMFILE, ENFILE, EIO
//   kHarness:   also ENOMEM and EAGAIN (fork or pipe refused: the machine, not the cell, is short)
//   kExec:      also ENOENT, ENOEXEC, ENOTDIR, ELOOP, ENAMETOOLONG, ETXTBSY, E2BIG (the program cannot start)
// A child that runs out of memory is not one: running out of memory is what a device verdict records.
bool IsEnvironmentErrno(int err, FailureStage stage);

// "ENOSPC (No space left on device)"; "errno 1234" for an unknown number.
std::string DescribeErrno(int err);

// The first line of a child's output that reports an environment failure (the message of ENOSPC, EDQUOT,
// EROFS, EACCES, EMFILE or ENFILE, as strerror and Python's OSError print it), trimmed; nothing if none.
std::optional<std::string> FindEnvironmentFailure(const std::string& output);

}  // namespace tmx
