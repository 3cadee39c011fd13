// Checks of a folder a program is about to write into, made before anything is written (nothing is created):
// whether the folder can be created and written, how much its filesystem has free, and what a written
// folder holds.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tmx {

// `path` itself when it exists, else its nearest existing ancestor ("." for a relative path none of whose
// folders exist).
std::string NearestExisting(const std::string& path);

// The real path `path` has, or will have once its missing folders are made: its existing folders with their
// symbolic links resolved (as realpath(3)), then the components still to make, `.` dropped and `..` taking
// the one before it off, as the kernel will walk them. Relative paths start at the working folder. What
// guards a folder against lying inside another (e.g. the checkout's configs/) compares these.
std::string RealPathToBe(const std::string& path);

// Why this process cannot create `folder` (with its missing parents) and write into it, or "" when it can.
// The folder, or else its nearest existing ancestor, must be a folder this process may write into and
// enter (access W_OK|X_OK); a path through a regular file can never be created. The reason names the path
// at fault and ends with the system's words, e.g. "/data/run.txt is a regular file, not a folder (Not a
// directory)", "/data is not writable by this process (Permission denied)".
std::string FolderWriteProblem(const std::string& folder);

// The bytes an unprivileged process may still write on the filesystem that holds `folder` (or its nearest
// existing ancestor): statvfs's f_bavail x f_frsize. IoError naming the folder when it cannot be read.
StatusOr<int64_t> FreeBytes(const std::string& folder);

// The bytes of the regular files in `folder` (not its sub-folders); 0 when it cannot be listed.
int64_t FolderFileBytes(const std::string& folder);

}  // namespace tmx
