#!/usr/bin/env python3
"""How many of torchtune's configs `tune validate` accepts unchanged, for some device type, and what blocks the rest.

    git clone --depth 1 https://github.com/pytorch/torchtune /tmp/torchtune
    python3 scripts/count_torchtune_configs.py /tmp/torchtune/recipes/configs [--tune build/bin/tune]

Each config is validated with device=cpu (this machine), then, if that fails, device=cuda (checked against the
device table's traits when the machine has no GPU). A config counts when either passes. For the rest, the
problems `tune validate` printed for cuda are tallied by their message (paths and line numbers left out), so
the table says which missing piece blocks how many configs; a second table lists the configs that one missing
piece alone blocks (what removing it would gain).
"""
import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def validate(tune, path, device):
    r = subprocess.run([str(tune), "validate", str(path), f"device={device}"], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def problems(output):
    """The problem lines of a failed validation, without the file position: 'key: message'."""
    out = []
    for line in output.splitlines():
        m = re.match(r"\s+\S+?:\d+:\d+: (.*)$", line) or re.match(r"^error: (.*)$", line)
        if m and "is not valid for recipe" not in m.group(1):
            out.append(m.group(1)[:160])
    return out or ["(no problem line) " + output.strip().splitlines()[-1][:160] if output.strip() else "(no output)"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", type=Path, help="torchtune's recipes/configs folder")
    p.add_argument("--tune", type=Path, default=ROOT / "build" / "bin" / "tune")
    args = p.parse_args()
    files = sorted(args.configs.rglob("*.yaml"))
    if not files:
        sys.exit(f"{args.configs}: no .yaml files; give torchtune's recipes/configs folder")
    passed = {"cpu": [], "cuda": []}
    blockers = collections.Counter()
    alone = collections.defaultdict(list)  # the configs whose one problem this is
    failing = []
    for f in files:
        code, _ = validate(args.tune, f, "cpu")
        if code == 0:
            passed["cpu"].append(f)
            continue
        code, out = validate(args.tune, f, "cuda")
        if code == 0:
            passed["cuda"].append(f)
            continue
        failing.append(f)
        found = set(problems(out))
        for problem in found:
            blockers[problem] += 1
        if len(found) == 1:
            alone[found.pop()].append(f.relative_to(args.configs).with_suffix("").as_posix())
    total = len(passed["cpu"]) + len(passed["cuda"])
    print(f"{total} of {len(files)} configs validate unchanged: {len(passed['cpu'])} on cpu, "
          f"{len(passed['cuda'])} more on cuda (device table traits)")
    print(f"\n{len(failing)} do not; their problems on cuda, by how many configs each blocks:\n")
    for problem, n in blockers.most_common():
        print(f"{n:4d}  {problem}")
    print(f"\n{sum(map(len, alone.values()))} are blocked by one problem alone:\n")
    for problem, names in sorted(alone.items(), key=lambda item: -len(item[1])):
        print(f"{len(names):4d}  {problem}\n      {' '.join(sorted(names))}")


if __name__ == "__main__":
    main()
