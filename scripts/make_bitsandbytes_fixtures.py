#!/usr/bin/env python3
"""Writes recipes/testdata/bitsandbytes_adamw8bit.json: what bitsandbytes' AdamW8bit (and its 32-bit state for a
tensor under min_8bit_size) does in three steps on fixed tensors, run by bitsandbytes itself on this machine's cpu;
recipes/adamw8bit_test.cc compares the C++ optimizer with it: the quantisation maps, the uint8 codes and absmax of
both moments exactly, the updated weights to 1e-6 (relative).

bitsandbytes 0.50.2 (pip, Python 3.11) runs its 8-bit blockwise optimizers on cpu: the update is
bitsandbytes/backends/cpu/ops.py (_optimizer_update_8bit_blockwise_cpu: dequantise both moments, update them in
float32, step the weight, requantise) and the quantisation its native cquantize_blockwise_cpu_fp32
(csrc/cpu_ops.cpp: absmax per block of 256, then a 65536-entry table from the normalised value to the nearest
code). Run once in a throw-away virtual environment outside the checkout (the one of
scripts/make_torchtune_0_6_1_fixtures.py will do):
    /tmp/ref-venv/bin/pip install bitsandbytes==0.50.2
    /tmp/ref-venv/bin/python scripts/make_bitsandbytes_fixtures.py
`--check` exits 1 when the committed file differs from what the script makes.

Inputs are made from a 64-bit LCG with power-of-two scales so that C++ makes the same float32 values without a
copy in the file; tensors are stored as hex of their little-endian bytes.
"""
import argparse
import json
import os
import struct
import sys

import torch
import bitsandbytes as bnb
import bitsandbytes.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "recipes", "testdata", "bitsandbytes_adamw8bit.json")
MASK = (1 << 64) - 1

# Same in adamw8bit_test.cc: (seed, scale exponent period) per tensor and step.
SHAPES = {"big": [48, 100], "small": [300]}  # 4800 elements: 18 blocks of 256 and one of 192; 300 < 4096
OPTIONS = dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
STEPS = 3


def lcg_tensor(seed, n):
    """n float32 values in [-1, 1) (24-bit fractions) scaled per block of 256 by 2**-(3*(block % 5))."""
    state = seed & MASK
    out = []
    for i in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK
        unit = (state >> 40) / float(1 << 24) * 2.0 - 1.0
        out.append(unit * 2.0 ** (-3 * ((i // 256) % 5)))
    return torch.tensor(out, dtype=torch.float32)


def hexbytes(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.float32:
        return struct.pack("<%df" % t.numel(), *t.tolist()).hex()
    assert t.dtype == torch.uint8
    return bytes(t.tolist()).hex()


def make():
    params = {}
    for k, (name, shape) in enumerate(SHAPES.items()):
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        params[name] = torch.nn.Parameter(lcg_tensor(1000 + k, n).reshape(shape))
    opt = bnb.optim.AdamW8bit(list(params.values()), **OPTIONS)
    steps = []
    for step in range(1, STEPS + 1):
        for k, (name, p) in enumerate(params.items()):
            p.grad = lcg_tensor(100 * step + k, p.numel()).reshape(p.shape)
        opt.step()
        record = {}
        for name, p in params.items():
            s = opt.state[p]
            r = {"weight": hexbytes(p), "step": s["step"]}
            for key in ("state1", "state2", "absmax1", "absmax2"):
                if key in s:
                    r[key] = hexbytes(s[key])
            r["state_dtype"] = str(s["state1"].dtype).replace("torch.", "")
            record[name] = r
        steps.append(record)
    return {
        "about": "bitsandbytes %s AdamW8bit on cpu, made by scripts/make_bitsandbytes_fixtures.py" % bnb.__version__,
        "bitsandbytes": bnb.__version__,
        "torch": torch.__version__.split("+")[0],
        "options": {"lr": OPTIONS["lr"], "betas": list(OPTIONS["betas"]), "eps": OPTIONS["eps"],
                    "weight_decay": OPTIONS["weight_decay"], "min_8bit_size": 4096, "block_size": 256},
        "shapes": SHAPES,
        "input_seeds": "weights: 1000 + index; gradient of step s: 100 * s + index (index in shapes' order)",
        "qmap_signed": hexbytes(F.create_dynamic_map(signed=True)),
        "qmap_unsigned": hexbytes(F.create_dynamic_map(signed=False)),
        "steps": steps,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(make(), indent=1, sort_keys=True) + "\n"
    if args.check:
        with open(OUT) as f:
            same = f.read() == text
        print("up to date" if same else OUT + " differs from what the script makes")
        return 0 if same else 1
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", OUT, len(text), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
