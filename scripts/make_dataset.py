#!/usr/bin/env python3
"""Generates recipes/data/datasets/tune-matrix/tiny_instruct/train.jsonl, the instruction dataset shipped with
tune-matrix (configs name it as source: tune-matrix/tiny_instruct).

Six small string and arithmetic tasks in Alpaca form (instruction, input, output), short enough that a tiny
byte-level model shows learning within a few hundred CPU steps. Standard library only, and byte-for-byte
deterministic: the random numbers come from the SplitMix64 generator written below, not from the `random`
module, so no Python version changes the output.

  scripts/make_dataset.py            # rewrite the shipped file
  scripts/make_dataset.py --check    # exit 1 if the shipped file differs from what this script makes
"""

import argparse
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "recipes" / "data" / "datasets" / "tune-matrix" / "tiny_instruct" / "train.jsonl"
MASK64 = (1 << 64) - 1
LETTERS = "abcdefghijklmnopqrstuvwxyz"
VOWELS = set("aeiou")


class SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014): tiny, fully specified, good enough for making data."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        """Uniform in [0, bound), by rejection so that there is no modulo bias."""
        threshold = (1 << 64) % bound
        while True:
            x = self.next()
            if x >= threshold:
                return x % bound

    def between(self, lo, hi):
        """Uniform in [lo, hi]."""
        return lo + self.below(hi - lo + 1)


def word(rng, lo=3, hi=8):
    return "".join(LETTERS[rng.below(26)] for _ in range(rng.between(lo, hi)))


def number(rng):
    """0..999 with 1, 2 and 3 digits equally likely."""
    digits = rng.between(1, 3)
    return rng.below(10) if digits == 1 else rng.between(10 ** (digits - 1), 10 ** digits - 1)


def reverse(rng):
    w = word(rng)
    return "Reverse the word.", w, w[::-1]


def upper(rng):
    w = word(rng)
    return "Write the word in upper case.", w, w.upper()


def repeat(rng):
    w = word(rng)
    return "Repeat the word.", w, w


def sort_letters(rng):
    w = word(rng)
    return "Sort the letters.", w, "".join(sorted(w))


def count_vowels(rng):
    w = word(rng)
    return "Count the vowels.", w, str(sum(c in VOWELS for c in w))


def add(rng):
    a, b = number(rng), number(rng)
    return "What is %d plus %d?" % (a, b), "", str(a + b)


TASKS = [reverse, upper, repeat, sort_letters, count_vowels, add]


def generate(seed, count):
    rng = SplitMix64(seed)
    seen = set()
    lines = []
    while len(lines) < count:
        instruction, input_text, output = TASKS[rng.below(len(TASKS))](rng)
        if (instruction, input_text) in seen:
            continue  # unique prompts, so any slice of the file can serve as held-out data
        seen.add((instruction, input_text))
        record = {"instruction": instruction, "input": input_text, "output": output}
        lines.append(json.dumps(record, ensure_ascii=True))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="file to write (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=20240601, help="generator seed (default: %(default)s)")
    parser.add_argument("--count", type=int, default=4000, help="number of records (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args()

    text = generate(args.seed, args.count)
    if args.check:
        current = args.out.read_text(encoding="ascii") if args.out.exists() else None
        if current != text:
            print("%s: out of date; fix: run scripts/make_dataset.py" % args.out, file=sys.stderr)
            return 1
        print("%s: up to date (%d records)" % (args.out, args.count))
        return 0
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(text, encoding="ascii")
    tmp.replace(args.out)
    print("wrote %s (%d records, %d bytes)" % (args.out, args.count, len(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
