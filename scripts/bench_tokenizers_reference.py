#!/usr/bin/env python3
"""Measures the Python reference tokenizers' encode throughput on benchmarks/tokenizer_corpus.txt, one encode call
per line, the same work as build/bin/tokenizer_benchmark, for the ratio in benchmarks/README.md.

Runs in the throw-away environment of scripts/make_tokenizer_fixtures.py (same pinned versions, same torchtune
source):
    /tmp/tok-venv/bin/python scripts/bench_tokenizers_reference.py --torchtune /tmp/torchtune
Single-threaded: set RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false (the script does) and OMP_NUM_THREADS=1.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_fixtures as fixtures  # noqa: E402


def measure(encode, lines, min_seconds):
    total = sum(len(line.encode("utf-8")) for line in lines)
    for line in lines:  # warm up (fills torchtune's BPE cache, as the C++ benchmark's first iteration does)
        encode(line)
    rounds, start = 0, time.perf_counter()
    while True:
        for line in lines:
            encode(line)
        rounds += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return total * rounds / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torchtune", required=True)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    args = parser.parse_args()
    fixtures.install_torchtune(args.torchtune)
    from torchtune.models.qwen2 import qwen2_tokenizer
    from torchtune.modules.transforms.tokenizers import HuggingFaceBaseTokenizer

    root = fixtures.ROOT
    with open(os.path.join(root, "benchmarks", "tokenizer_corpus.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    toks = fixtures.family_tokenizers()
    full = qwen2_tokenizer(os.path.join(fixtures.OUT, "qwen2_vocab.json"), os.path.join(fixtures.OUT, "qwen2_merges.txt"))
    hf = HuggingFaceBaseTokenizer(fixtures.tok_path("tokenizer.json"),
                                  generation_config_path=fixtures.tok_path("generation_config.json"))
    cases = [
        ("tiktoken", "torchtune llama3_tokenizer (tiktoken)", toks["llama3_tokenizer"]),
        ("sentencepiece", "torchtune llama2_tokenizer (sentencepiece)", toks["llama2_tokenizer"]),
        ("byte_bpe_tiny", "torchtune qwen2_tokenizer (Python + regex)", toks["qwen2_tokenizer"]),
        ("byte_bpe_full", "torchtune qwen2_tokenizer, 63k vocab", full),
        ("hf_tokenizer_json", "torchtune HuggingFaceBaseTokenizer (tokenizers)", hf),
    ]
    for name, what, tok in cases:
        rate = measure(lambda text, tok=tok: tok.encode(text, add_bos=False, add_eos=False), lines, args.min_seconds)
        print(f"{name:20s} {rate / 1e6:8.2f} MB/s  {what}")


if __name__ == "__main__":
    main()
