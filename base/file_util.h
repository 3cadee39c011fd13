// Small filesystem helpers. Every file the project writes goes through WriteFileAtomically, so a crash or
// a kill never leaves a half-written config, journal snapshot or report.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tmx {

// Reads the whole file, opened as an InputFile (base/input_file.h, which has the ReadFile of a kind's limit):
// NotFound if it does not exist; InvalidArgument if it is not a regular file (found without blocking, so a
// FIFO with no writer never hangs the reader) or is over 1 GiB; IoError if it cannot be read.
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to a temporary file, fsyncs it and renames it over the file, keeping the permissions of
// an existing file. Readers see either the old or the new contents, never a mix. When `path` is a symbolic
// link, the file it finally points to is the one replaced (the temporary file is made in that file's folder)
// and the link stays. An existing target that is not a regular file is InvalidArgument; nothing is written.
// The temporary file is named by AtomicWriteTempName; a writer killed before the rename leaves it behind
// for RemoveStaleTempFiles (base/folder.h).
Status WriteFileAtomically(const std::string& path, const std::string& contents);
// The same for contents given as pieces written one after the other, so a large file (a checkpoint) need not be
// assembled in memory first. The pieces must stay valid until the call returns.
Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& pieces);

// ".<name>.tm-tmp.<pid>.<n>": the name of WriteFileAtomically's temporary file for the file `name`, written
// by process `pid` (n tells apart several writes by one process).
std::string AtomicWriteTempName(const std::string& name, int64_t pid, int n);
// Whether `name` (a file name without folder) is such a temporary file, or one of the older form
// "<name>.tmp.<pid>"; `pid` (may be null) receives the writer's pid.
bool IsAtomicWriteTempName(const std::string& name, int64_t* pid);

// The file that `path` finally names after following symbolic links (relative links are relative to the
// link's folder); `path` itself when it is not a link or does not exist. InvalidArgument for a chain of
// more than 40 links (a loop).
StatusOr<std::string> ResolveSymlinks(const std::string& path);

// "a regular file", "a folder", "a FIFO", "a socket", "a character device", "a block device",
// "a symbolic link", for messages.
std::string DescribeFileKind(mode_t mode);

// What is at `path` (following symlinks).
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);

// Whether `a` and `b` name one existing file (same device and inode, after symlinks), however spelled.
bool SameFile(const std::string& a, const std::string& b);

// Creates `path` and its missing parents (like mkdir -p).
Status MakeDirs(const std::string& path);

// The folder part of `path`: "a/b/c.txt" -> "a/b", "c.txt" -> ".", "/c.txt" -> "/".
std::string ParentDir(const std::string& path);

// The folder of the running executable (from /proc/self/exe), "" if unknown.
std::string ExecutableDir();

// Appends one line (a trailing '\n' is added) and fsyncs, for append-only journals.
Status AppendLineDurably(const std::string& path, const std::string& line);

}  // namespace tmx
