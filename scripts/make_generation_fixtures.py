#!/usr/bin/env python3
"""Writes the greedy-decoding fixtures recipes/checkpoint/testdata/hf_parity/<family>/generated.safetensors.

For each tiny random model committed by make_parity_fixtures.py (read from its folder, which is left unchanged),
takes a 7-token prompt from the ids in expected.safetensors and lets Hugging Face generate 20 new tokens greedily
with the KV cache, in float32 with eager attention and no end-of-sequence token, so that it never stops early.
20 tokens run well past the 5-token sliding windows of mistral, phi3 and gemma2.
recipes/checkpoint/hf_parity_test.cc compares the project's KV-cached greedy decoding with these tokens.

A token fixture is only fair if no step is a near tie, so one forward without the cache over prompt + new tokens
must pick the same tokens, each ahead of the runner-up logit by at least MIN_MARGIN. Otherwise the next prompt is
tried: input_ids[1, 0:7], then the other 7-token windows of the two rows; the one used is in the metadata.

Made once and committed; rerun only to change the fixtures. Needs Python 3.11 and, pinned:
    torch==2.11.0 (CPU is enough)  transformers==4.57.6  safetensors==0.8.0  numpy (for safetensors.torch)
e.g.  python3 -m venv /tmp/hf-venv && /tmp/hf-venv/bin/pip install torch==2.11.0 transformers==4.57.6 \\
      safetensors==0.8.0 numpy && /tmp/hf-venv/bin/python scripts/make_generation_fixtures.py [family ...]
"""

import os
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

PINNED = {"torch": "2.11.0", "transformers": "4.57.6"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "checkpoint", "testdata",
                   "hf_parity")
PROMPT, NEW, MIN_MARGIN = 7, 20, 1e-3


def prompts(ids):
    """(name, [1, PROMPT] ids) in the order tried: the first window of row 0, of row 1, then the later ones."""
    for start in range(ids.shape[1] - PROMPT + 1):
        for row in range(ids.shape[0]):
            yield f"input_ids[{row}, {start}:{start + PROMPT}]", ids[row:row + 1, start:start + PROMPT].clone()


def decode(model, prompt):
    """Greedy generation with the cache; returns the new tokens, the minimum top-1 over top-2 margin of the
    uncached logits at the generated steps (-inf where they pick another token) and the largest difference
    between the cached and the uncached logits."""
    # Replacing the model's own generation config (rather than passing one to generate, which would fill the unset
    # eos_token_id back in from config.json) leaves no end-of-sequence or padding token to stop or mask on.
    model.generation_config = transformers.GenerationConfig(max_new_tokens=NEW, do_sample=False, num_beams=1,
                                                            use_cache=True, eos_token_id=None, pad_token_id=None)
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), return_dict_in_generate=True,
                             output_logits=True)
        sequence = out.sequences
        assert sequence.shape == (1, PROMPT + NEW), sequence.shape
        tokens = sequence[:, PROMPT:]
        cached = torch.stack(out.logits, dim=1).float()  # [1, NEW, vocab]
        uncached = model(input_ids=sequence, use_cache=False).logits[:, PROMPT - 1:-1].float()
    top = uncached.topk(2, dim=-1)
    if not torch.equal(top.indices[..., 0], tokens):
        return tokens, float("-inf"), (cached - uncached).abs().max().item()
    margin = (top.values[..., 0] - top.values[..., 1]).min().item()
    return tokens, margin, (cached - uncached).abs().max().item()


def main():
    for package, version in PINNED.items():
        found = getattr(sys.modules[package], "__version__").split("+")[0]
        if found != version:
            sys.exit(f"{package} {found} found; the fixtures are made with {version} (see the docstring)")
    only = sys.argv[1:]  # families to (re)make; none: all
    for family in sorted(os.listdir(OUT)):
        if only and family not in only:
            continue
        folder = os.path.join(OUT, family)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                                  dtype=torch.float32).eval()
        ids = load_file(os.path.join(folder, "expected.safetensors"))["input_ids"]
        for name, prompt in prompts(ids):
            tokens, margin, drift = decode(model, prompt)
            if margin >= MIN_MARGIN:
                break
            why = "the uncached argmax differs" if margin == float("-inf") else f"margin {margin:.2e}"
            print(f"{family:12s} {name}: {why}, trying the next prompt")
        else:
            sys.exit(f"{family}: no {PROMPT}-token prompt gives {NEW} greedy tokens with margins >= {MIN_MARGIN}")
        save_file({"prompt": prompt.contiguous(), "tokens": tokens.contiguous()},
                  os.path.join(folder, "generated.safetensors"),
                  metadata={"family": family, "prompt": name, "transformers": transformers.__version__,
                            "torch": torch.__version__, "max_new_tokens": str(NEW), "min_margin": f"{margin:.6g}"})
        print(f"{family:12s} {name}  tokens {tokens[0].tolist()}  min margin {margin:.4f}  "
              f"|cached - uncached logits| <= {drift:.1e}")


if __name__ == "__main__":
    main()
