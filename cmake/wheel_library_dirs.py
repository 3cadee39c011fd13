"""Prints the folders that hold the shared libraries of the installed torch wheel and of every distribution
it depends on, one per line, in the order the dependencies are reached
(torch first, then depth first in the order each distribution lists its requirements).

    python3 cmake/wheel_library_dirs.py [SITE_PACKAGES]

Read from the packages' metadata only (importlib.metadata: torch's requirements, their requirements in turn,
each one's RECORD of files), so nothing is imported and no folder name is assumed: NCCL, cuDNN, the CUDA
runtime are wherever the wheels that torch requires put them. SITE_PACKAGES, when given, is searched before
this interpreter's own path (a LibTorch found by CMAKE_PREFIX_PATH names its site-packages). A requirement
that is not installed is skipped; one that applies only to an extra counts when that extra was asked for
(torch asks for cuda-toolkit[cublas,...]). Python extension modules (*.cpython-*.so, *.abi3.so) are not
libraries to link against and are left out. Exit status 1, with one line naming the path searched, when no
torch distribution is installed there.

cmake/FindLibTorch.cmake passes the folders to the linker as -rpath-link, ahead of the system's folders.
"""
import importlib.metadata
import os
import re
import sys

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")
_EXTENSION_MODULE = re.compile(r"\.(cpython-[^.]*|abi3)\.so$")


def normalise(name):
    """The distribution name as packaging compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(path):
    """Normalised name -> distribution; the first on the path wins, as for imports."""
    found = {}
    for dist in importlib.metadata.distributions(path=path):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(normalise(name), dist)
    return found


def requirements(dist, extras):
    """(name, extras) of each requirement of dist that applies when `extras` are asked for."""
    for line in dist.requires or []:
        requirement, _, marker = line.partition(";")
        match = _REQUIREMENT.match(requirement)
        if not match:
            continue
        marker_extras = {normalise(e) for e in _EXTRA_MARKER.findall(marker)}
        if marker_extras and not marker_extras & extras:
            continue
        asked = {normalise(e) for e in (match.group(2) or "").split(",") if e.strip()}
        yield normalise(match.group(1)), asked


def library_dirs(dist):
    """The folders holding dist's shared libraries, in RECORD order."""
    dirs = []
    for file in dist.files or []:
        name = file.name
        if _SHARED_LIBRARY.search(name) and not _EXTENSION_MODULE.search(name):
            folder = os.path.dirname(os.path.realpath(dist.locate_file(file)))
            if folder not in dirs:
                dirs.append(folder)
    return dirs


def reach(dists, name, extras, asked, order):
    """Depth first from name, so that what a requirement brings (cuda-toolkit's libraries) comes right after
    it: the linker then takes a library from the wheel that torch asked for before another's copy (triton's)."""
    if name in asked and extras <= asked[name]:
        return
    if name not in asked:
        order.append(name)
    asked[name] = asked.get(name, set()) | extras
    for dep, dep_extras in requirements(dists[name], asked[name]):
        if dep in dists:
            reach(dists, dep, dep_extras, asked, order)


def wheel_library_dirs(path):
    dists = installed(path)
    if "torch" not in dists:
        return None
    order = []
    reach(dists, "torch", set(), {}, order)
    dirs = []
    for name in order:
        for folder in library_dirs(dists[name]):
            if folder not in dirs:
                dirs.append(folder)
    return dirs


def main(argv):
    path = argv[1:2] + sys.path
    dirs = wheel_library_dirs(path)
    if dirs is None:
        print("wheel_library_dirs: no torch distribution installed in " + os.pathsep.join(path), file=sys.stderr)
        return 1
    for folder in dirs:
        print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
