#!/usr/bin/env python3
"""Writes recipes/models/testdata/nf4_torchao_0_11.safetensors: torchao 0.11's NF4Tensor (what torchtune 0.6.1's
QLoRA builders quantise their frozen base with, block_size 64, scaler_block_size 256) of a few seeded weights;
recipes/models/nf4_test.cc compares recipes/models/nf4.cc with it byte for byte.

Pinned versions (Python 3.11): torch==2.11.0 (the LibTorch tune-matrix builds with) torchao==0.11.0. Run it once in
the throw-away virtual environment of scripts/make_torchtune_0_6_1_fixtures.py:
    /tmp/ref-venv/bin/python scripts/make_nf4_fixtures.py
`--check` exits 1 when the committed file differs from what the script makes.

Per case <name>: <name>.weight (the input, bf16 or fp32), <name>.quantized_data (U8, two 4-bit codes a byte),
<name>.quantized_scalers (I8, one a block of 64), <name>.quantization_factor (one per 256 blocks, the weight's
dtype), <name>.scaler_mean (shape [1]) and <name>.dequantized (get_original_weight(), the weight's dtype). The
file is written by hand (8-byte header length, JSON header, data), as safetensors defines it, so the script needs
no safetensors package.
"""
import argparse
import json
import os
import struct
import sys

import torch
from torchao.dtypes.nf4tensor import to_nf4

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "recipes", "models", "testdata", "nf4_torchao_0_11.safetensors")

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.uint8: "U8", torch.int8: "I8"}


def cases():
    g = torch.Generator().manual_seed(23)
    # One scaler block (64 x 256 = 16384 weights), several, a tall and a wide shape, an fp32 weight, and weights
    # drawn like a trained model's (std 0.02) and with outliers (heavy tails stretch a block's absmax).
    yield "bf16_64x256", (torch.randn(64, 256, generator=g) * 0.02).to(torch.bfloat16)
    yield "bf16_128x256", (torch.randn(128, 256, generator=g) * 0.02).to(torch.bfloat16)
    yield "bf16_512x64", torch.randn(512, 64, generator=g).to(torch.bfloat16)
    heavy = torch.randn(32, 1024, generator=g) * 0.02
    heavy[torch.rand(32, 1024, generator=g) < 0.01] *= 50
    yield "bf16_outliers_32x1024", heavy.to(torch.bfloat16)
    yield "fp32_128x128", torch.rand(128, 128, generator=g) * 2 - 1


def tensors():
    out = {}
    for name, w in cases():
        nf4 = to_nf4(w)  # block_size=64, scaler_block_size=256: torchtune's defaults
        assert nf4.block_size == 64 and nf4.scaler_block_size == 256
        out[name + ".weight"] = w
        out[name + ".quantized_data"] = nf4.quantized_data
        out[name + ".quantized_scalers"] = nf4.quantized_scalers
        out[name + ".quantization_factor"] = nf4.quantization_factor
        out[name + ".scaler_mean"] = nf4.scaler_mean.reshape(1)
        out[name + ".dequantized"] = nf4.get_original_weight()
    return out


def serialize(named):
    header, blobs, offset = {}, [], 0
    for name in sorted(named):
        t = named[name]
        flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))  # stride 1 even for one element
        data = flat.view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs)


def write_or_check(out, make_tensors, description):
    """The command line of a safetensors fixture script: writes `out` from make_tensors(), or with --check exits 1
    when the committed file differs from what it makes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = parser.parse_args()
    data = serialize(make_tensors())
    if args.check:
        with open(out, "rb") as f:
            same = f.read() == data
        print(out + (": up to date" if same else ": differs from what the script makes"))
        sys.exit(0 if same else 1)
    with open(out, "wb") as f:
        f.write(data)
    print("wrote " + out + " (" + str(len(data)) + " bytes)")


def main():
    write_or_check(OUT, tensors, __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
