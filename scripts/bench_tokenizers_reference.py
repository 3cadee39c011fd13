#!/usr/bin/env python3
"""Measures the Python reference tokenizers' encode throughput on benchmarks/tokenizer_corpus.txt, one encode call
per line, the same work as build/bin/tokenizer_benchmark, for the ratio in benchmarks/README.md.

Runs in the throw-away environment of scripts/make_tokenizer_fixtures.py (same pinned versions, same torchtune
source):
    /tmp/tok-venv/bin/python scripts/bench_tokenizers_reference.py --torchtune /tmp/torchtune
Single-threaded: set RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false (the script does) and OMP_NUM_THREADS=1.
Rates are bytes per second of CPU time (time.process_time), in MiB/s, as Google Benchmark's bytes_per_second
counts them, so a busy machine affects both sides alike. Two columns: through torchtune's tokenizer class, and
the library's own encode alone (tiktoken's Encoding.encode, SentencePieceProcessor.encode, tokenizers'
Tokenizer.encode; torchtune's Qwen2 tokenizer is itself the library).
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
    rounds, start = 0, time.process_time()
    while True:
        for line in lines:
            encode(line)
        rounds += 1
        elapsed = time.process_time() - start
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
    tiktoken_model = toks["llama3_tokenizer"].tt_model.tt_model
    spm = toks["llama2_tokenizer"]._spm_model.spm_model
    cases = [  # name, torchtune's tokenizer, the library's own encode
        ("tiktoken", toks["llama3_tokenizer"],
         lambda t: tiktoken_model.encode(t, allowed_special=set(), disallowed_special=())),
        ("sentencepiece", toks["llama2_tokenizer"], lambda t: spm.encode(t)),
        ("byte_bpe_tiny", toks["qwen2_tokenizer"], None),
        ("byte_bpe_full", full, None),
        ("hf_tokenizer_json", hf, lambda t: hf.tokenizer.encode(t)),
    ]
    print(f"{'benchmark':20s} {'torchtune MiB/s':>16s} {'library MiB/s':>14s}")
    for name, tok, raw in cases:
        wrapped = measure(lambda text, tok=tok: tok.encode(text, add_bos=False, add_eos=False), lines, args.min_seconds)
        alone = measure(raw, lines, args.min_seconds) if raw else wrapped
        print(f"{name:20s} {wrapped / 2**20:16.2f} {alone / 2**20:14.2f}")


if __name__ == "__main__":
    main()
