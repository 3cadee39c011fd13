// Folders a program run by a user must never write into: the file system's root, the system's own folders
// (/usr, /etc, ... and everything under them) and the home folder itself. A run writes its checkpoints and
// summary straight into its output folder, and resuming reads them back from there: as root, output_dir=/usr/bin
// would put them among the system's programs.
#pragma once

#include <string>

namespace tmx {

// Why `dir` may not be written into, as words to follow "'<dir>' ": "is a system folder", "is inside the system
// folder /usr", "is the home folder"; "" when it may. The real path it will have is compared (RealPathToBe:
// symbolic links resolved, so /bin/x is /usr/bin/x where /bin links there; a relative path from the working
// folder). System folders: /, /home, /root, /run and /var themselves (their sub-folders are users' and
// services' own, /var/tmp a scratch folder), and anything under /bin, /boot, /dev, /etc, /lib, /lib32, /lib64,
// /libx32, /proc, /sbin, /sys and /usr, /var/lib, /var/log and /var/cache. The home folder: $HOME, and "~".
std::string SystemFolderProblem(const std::string& dir);

}  // namespace tmx
