#!/usr/bin/env python3
"""Generates recipes/data/datasets/tune-matrix/tiny_preference/train.jsonl, the preference dataset shipped with
tune-matrix (the tiny DPO configs name it as source: tune-matrix/tiny_preference).

Each of the first --count records of tune-matrix/tiny_instruct becomes a preference pair in the form of
torchtune's hh_rlhf_helpful_dataset (chosen and rejected conversations, the same user turn): the chosen answer
is the record's output, the rejected one a near miss of it (a number plus one; a word reversed, or, when the
reversal changes nothing or is the right answer, the word with its first letter doubled). Standard library
only, deterministic.

  scripts/make_preference_dataset.py            # rewrite the shipped file
  scripts/make_preference_dataset.py --check    # exit 1 if the shipped file differs from what this script makes
"""

import argparse
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
DATASETS = REPO / "recipes" / "data" / "datasets" / "tune-matrix"
DEFAULT_IN = DATASETS / "tiny_instruct" / "train.jsonl"
DEFAULT_OUT = DATASETS / "tiny_preference" / "train.jsonl"


def near_miss(record):
    out = record["output"]
    if out.isdigit():
        return str(int(out) + 1)
    reversed_out = out[::-1]
    if reversed_out != out and not record["instruction"].startswith("Reverse"):
        return reversed_out
    return out[0] + out


def pair(record):
    prompt = record["instruction"] + ("\n" + record["input"] if record["input"] else "")
    user = {"content": prompt, "role": "user"}
    return {"chosen": [user, {"content": record["output"], "role": "assistant"}],
            "rejected": [user, {"content": near_miss(record), "role": "assistant"}]}


def make(source, count):
    lines = source.read_text().splitlines()[:count]
    return "".join(json.dumps(pair(json.loads(line))) + "\n" for line in lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--source", type=pathlib.Path, default=DEFAULT_IN)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = make(args.source, args.count)
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'differs from what the script makes'}")
        sys.exit(0 if same else 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.count} pairs to {args.out}")


if __name__ == "__main__":
    main()
