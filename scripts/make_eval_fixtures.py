#!/usr/bin/env python3
"""Writes the fixtures of the eleuther_eval recipe from EleutherAI's lm-evaluation-harness itself.

    recipes/data/samples/eval/truthfulqa_mc.json   the shipped TruthfulQA sample (first 40 questions of the
                                                   validation split, in the harness's dataset layout)
    recipes/testdata/eleuther_eval/model/          a tiny random Llama (the shape of tune_matrix.models.tiny_llama3_2
                                                   with a 2000-token vocabulary), bf16 safetensors + config.json
    recipes/testdata/eleuther_eval/expected.json   what the harness computed for it: each request's log-likelihood
                                                   and greedy flag, each document's score, each task's acc and
                                                   acc_stderr, the contexts, and the token ids of a few requests
    recipes/testdata/eleuther_eval/expected_rolling.json   the harness's wikitext (loglikelihood_rolling) on the
                                                   shipped pages (recipes/data/samples/eval/wikitext.json) with the
                                                   same model, the SentencePiece sample m.model (transformers'
                                                   LlamaTokenizer, legacy; llama2_tokenizer there) and max_length 64,
                                                   so that each page takes several windows: each page's text after
                                                   detokenizing, token ids, windows and log-likelihood, and the metrics

The tokenizer is the shipped byte-level BPE (recipes/data/samples/tokenizers/tiny_bpe_*), read by transformers'
Qwen2Tokenizer here and by tune-matrix's qwen2_tokenizer there. The harness's HFLM runs the model in float32 on
the CPU, without a BOS token (as torchtune's _LLMEvalWrapper, add_bos=False), batch size 8, on the harness's own
truthfulqa_mc1 and truthfulqa_mc2 task definitions with only the dataset redirected to the shipped sample (no
network). recipes/eleuther_eval_test.cc compares.

Made once and committed; rerun only to change the fixtures, in a throw-away venv outside the checkout. Pinned:
    lm-eval==0.4.8 (the newest torchtune's eleuther_eval accepts)  transformers==4.57.6  torch==2.11.0 (CPU is enough)
e.g.  python3 -m venv /tmp/eval-venv && /tmp/eval-venv/bin/pip install lm-eval==0.4.8 transformers==4.57.6 \\
      sentencepiece numpy torch==2.11.0 && /tmp/eval-venv/bin/python scripts/make_eval_fixtures.py
To rewrite the shipped sample too, pass TruthfulQA's data/v0/mc_task.json (the file the Hub's truthful_qa
multiple_choice config is built from, in its order): --mc-task path/to/mc_task.json
"""

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SAMPLE = os.path.join(ROOT, "recipes", "data", "samples", "eval", "truthfulqa_mc.json")
WIKITEXT = os.path.join(ROOT, "recipes", "data", "samples", "eval", "wikitext.json")
TOKENIZERS = os.path.join(ROOT, "recipes", "data", "samples", "tokenizers")
OUT = os.path.join(ROOT, "recipes", "testdata", "eleuther_eval")
PINNED = {"lm_eval": "0.4.8", "torch": "2.11.0", "transformers": "4.57.6"}
SAMPLE_QUESTIONS = 40
TOKEN_DOCS = 3  # documents whose requests' token ids are kept (the rest keep their lengths)


def check_versions():
    from importlib.metadata import version

    for package, pinned in PINNED.items():
        found = version(package.replace("_", "-")).split("+")[0]
        if found != pinned:
            sys.exit(f"{package} {found} found; the fixtures are made with {pinned} (see the docstring)")


def write_sample(mc_task):
    """The first SAMPLE_QUESTIONS questions of TruthfulQA's mc_task.json, as the Hub dataset lays them out."""
    with open(mc_task, encoding="utf-8") as f:
        rows = json.load(f)[:SAMPLE_QUESTIONS]
    docs = []
    for row in rows:
        doc = {"question": row["question"]}
        for key in ("mc1_targets", "mc2_targets"):
            doc[key] = {"choices": list(row[key].keys()), "labels": list(row[key].values())}
        docs.append(doc)
    os.makedirs(os.path.dirname(SAMPLE), exist_ok=True)
    with open(SAMPLE, "w", encoding="utf-8") as f:
        json.dump(docs, f, indent=1, ensure_ascii=False)
        f.write("\n")


def tiny_llama():
    """tune_matrix.models.tiny_llama3_2 (vocab_size=2000): 2 layers, width 64, 4 heads, 2 kv heads, MLP 256,
    RoPE base 500000 scaled by 32, tied embeddings; weights redrawn so the log-likelihoods differ by choice, and
    rounded to bf16 so that the committed file holds exactly the weights the harness ran."""
    config = transformers.LlamaConfig(
        vocab_size=2000, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192})
    model = transformers.LlamaForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(54)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(1.5 * torch.randn(p.shape, generator=generator) / p.shape[-1] ** 0.5)
            p.copy_(p.to(torch.bfloat16).float())
    return model


def task_configs(folder):
    """The harness's truthfulqa_mc1/mc2, each read from the sample file instead of the Hub."""
    import lm_eval

    tasks = os.path.join(os.path.dirname(lm_eval.__file__), "tasks", "truthfulqa")
    for name in ("truthfulqa_mc1", "truthfulqa_mc2"):
        with open(os.path.join(folder, name + "_sample.yaml"), "w") as f:
            f.write(f"include: {os.path.join(tasks, name + '.yaml')}\n"
                    f"task: {name}_sample\n"
                    f"tag: []\n"
                    f"dataset_path: json\n"
                    f"dataset_name: null\n"
                    f"dataset_kwargs:\n  data_files:\n    validation: {SAMPLE}\n")


def rolling_configs(folder):
    """The harness's wikitext, read from the shipped pages (its validation split) instead of the Hub."""
    import lm_eval

    with open(os.path.join(folder, "wikitext_sample.yaml"), "w") as f:
        f.write(f"include: {os.path.join(os.path.dirname(lm_eval.__file__), 'tasks', 'wikitext', 'wikitext.yaml')}\n"
                f"task: wikitext_sample\n"
                f"dataset_path: json\n"
                f"dataset_name: null\n"
                f"training_split: null\n"
                f"test_split: null\n"
                f"dataset_kwargs:\n  data_files:\n    validation: {WIKITEXT}\n")


def expected_rolling(model):
    """The harness's wikitext on the shipped pages, in windows of 64 tokens."""
    from lm_eval import utils
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict
    from lm_eval.tasks.wikitext.preprocess_wikitext import wikitext_detokenizer

    tokenizer = transformers.LlamaTokenizer(os.path.join(TOKENIZERS, "m.model"), legacy=True)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=8, max_length=64, device="cpu")
    with tempfile.TemporaryDirectory() as folder:
        rolling_configs(folder)
        result = evaluate(lm, get_task_dict(["wikitext_sample"], TaskManager(include_path=folder)), log_samples=True)
    metrics = result["results"]["wikitext_sample"]
    docs = []
    for s in sorted(result["samples"]["wikitext_sample"], key=lambda s: s["doc_id"]):
        text = wikitext_detokenizer(s["doc"])
        ids = lm.tok_encode(text)
        windows = [utils.make_disjoint_window(w) for w in
                   utils.get_rolling_token_windows(ids, lm.prefix_token_id, lm.max_length, 1)]
        docs.append({"doc_id": s["doc_id"], "text": text, "token_ids": ids,
                     "windows": [{"context": list(c), "continuation": list(p)} for c, p in windows],
                     "loglikelihood": float(s["filtered_resps"][0]), "words": s["word_perplexity"][1],
                     "bytes": s["byte_perplexity"][1]})
    return {"harness": "lm-eval " + PINNED["lm_eval"], "tokenizer": "llama2_tokenizer on m.model",
            "max_length": lm.max_length, "prefix_token_id": lm.prefix_token_id,
            "word_perplexity": metrics["word_perplexity,none"], "byte_perplexity": metrics["byte_perplexity,none"],
            "bits_per_byte": metrics["bits_per_byte,none"], "docs": docs}


def expected_task(lm, result, samples, name):
    metrics = result["results"][name + "_sample"]
    docs = []
    tokens = []
    for s in sorted(samples[name + "_sample"], key=lambda s: s["doc_id"]):
        context = s["arguments"][0][0]
        lls = [float(r[0]) for r in s["filtered_resps"]]
        greedy = [bool(r[1]) for r in s["filtered_resps"]]
        pairs = [lm._encode_pair(a[0], a[1]) for a in s["arguments"]]
        docs.append({"doc_id": s["doc_id"], "context": context, "continuations": [a[1] for a in s["arguments"]],
                     "loglikelihoods": lls, "is_greedy": greedy, "acc": float(s["acc"]),
                     "context_tokens": len(pairs[0][0]), "continuation_tokens": [len(p[1]) for p in pairs]})
        if s["doc_id"] < TOKEN_DOCS:
            tokens.append({"doc_id": s["doc_id"], "context_ids": pairs[0][0],
                           "continuation_ids": [p[1] for p in pairs]})
    return {"acc": metrics["acc,none"], "acc_stderr": metrics["acc_stderr,none"], "docs": docs, "tokens": tokens}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mc-task", help="TruthfulQA's data/v0/mc_task.json, to rewrite the shipped sample")
    args = parser.parse_args()
    check_versions()
    if args.mc_task:
        write_sample(args.mc_task)
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict

    torch.set_num_threads(1)
    tokenizer = transformers.Qwen2Tokenizer(os.path.join(TOKENIZERS, "tiny_bpe_vocab.json"),
                                            os.path.join(TOKENIZERS, "tiny_bpe_merges.txt"))
    model = tiny_llama()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=8, max_length=512, device="cpu")
    with tempfile.TemporaryDirectory() as folder:
        task_configs(folder)
        task_dict = get_task_dict(["truthfulqa_mc1_sample", "truthfulqa_mc2_sample"], TaskManager(include_path=folder))
        result = evaluate(lm, task_dict, log_samples=True)
    samples = result["samples"]
    expected = {
        "harness": "lm-eval " + PINNED["lm_eval"], "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0], "model": "tune_matrix.models.tiny_llama3_2, vocab_size 2000",
        "tokenizer": "qwen2_tokenizer on tiny_bpe_vocab.json + tiny_bpe_merges.txt", "max_length": 512,
        "tasks": {name: expected_task(lm, result, samples, name) for name in ("truthfulqa_mc1", "truthfulqa_mc2")},
    }
    folder = os.path.join(OUT, "model")
    shutil.rmtree(folder, ignore_errors=True)
    # A copy: converting the model itself would round its RoPE inv_freq buffer to bf16 as well.
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    gen = os.path.join(folder, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    for name, task in expected["tasks"].items():
        print(f"{name}: acc {task['acc']:.6f} +- {task['acc_stderr']:.6f} over {len(task['docs'])} documents")
    rolling = expected_rolling(model)
    with open(os.path.join(OUT, "expected_rolling.json"), "w") as f:
        json.dump(rolling, f, indent=1)
        f.write("\n")
    print(f"wikitext: word_perplexity {rolling['word_perplexity']:.4f}, byte_perplexity {rolling['byte_perplexity']:.6f}, "
          f"bits_per_byte {rolling['bits_per_byte']:.6f} over {len(rolling['docs'])} pages, "
          f"{sum(len(d['windows']) for d in rolling['docs'])} windows")


if __name__ == "__main__":
    main()
