// Small filesystem helpers. Every file the project writes goes through WriteFileAtomically, so a crash or
// a kill never leaves a half-written config, journal snapshot or report.
#pragma once

#include <string>

#include "harness/status.h"

namespace tmx {

// Reads the whole file. NotFound if it does not exist, IoError if it cannot be read.
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to a temporary file beside `path`, fsyncs it and renames it over `path`, keeping the
// permissions of an existing file. Readers see either the old or the new contents, never a mix.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// What is at `path` (following symlinks).
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);

// Creates `path` and its missing parents (like mkdir -p).
Status MakeDirs(const std::string& path);

// The folder part of `path`: "a/b/c.txt" -> "a/b", "c.txt" -> ".", "/c.txt" -> "/".
std::string ParentDir(const std::string& path);

// The folder of the running executable (from /proc/self/exe), "" if unknown.
std::string ExecutableDir();

// Appends one line (a trailing '\n' is added) and fsyncs, for append-only journals.
Status AppendLineDurably(const std::string& path, const std::string& line);

}  // namespace tmx
