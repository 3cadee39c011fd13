#!/usr/bin/env python3
"""Writes recipes/models/testdata/dora_torchtune_0_6_1.json: torchtune 0.6.1's DoRALinear (fp32, fixed seed) on a
fixed input, its magnitude as initialize_dora_magnitude sets it, the forward output, the gradients of a fixed
loss with respect to every parameter and the input, and torchtune's merged weight (get_merged_lora_ckpt). The C++
test (recipes/models/lora_test.cc, DoraTest) loads the same weights into its DoRA linear and compares to 1e-5.

Cases: one layer without a bias, one with a bias (torchtune's forward scales the bias with the base output by
magnitude / weight_norm), and QDoRA: DoRALinear(quantize_base=True), whose base torchtune holds as torchao's NF4Tensor
and dequantises for the row norms (the smallest weight NF4 holds, 128 x 128). For that case "weight" is the
layer's weight before quantisation (the C++ test quantises it as the checkpoint loader does; nf4_test.cc checks that
quantisation byte for byte), written with the 9 significant digits that give back its float32 values, and the base
has no gradient. lora_b is drawn non-zero (a fresh layer's is zero, which would hide lora_a's gradient and
the adapter's part of the norm), and the magnitude is moved off its initial value after recording it, so the
forward's magnitude / weight_norm is not 1. Dropout is 0: its mask is the C++ side's own RNG draw (tested there).

Run once, with the reference environment of scripts/make_torchtune_0_6_1_fixtures.py (torchtune 0.6.1, torch):
    /tmp/ref-venv/bin/python scripts/make_dora_fixtures.py
`--check` exits 1 when the committed file differs from what the script makes.
"""
import argparse
import json
import os
import sys

import torch
from torchtune.modules.peft import DoRALinear
from torchtune.modules.peft._utils import get_merged_lora_ckpt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "recipes", "models", "testdata", "dora_torchtune_0_6_1.json")

# name, in_dim, out_dim, rank, alpha, use_bias, input shape, quantize_base
CASES = [
    ("no_bias", 12, 10, 4, 8.0, False, [2, 3, 12], False),
    ("bias", 8, 6, 2, 5.0, True, [4, 8], False),
    ("nf4_base", 128, 128, 4, 8.0, False, [3, 128], True),
]


def values(t):
    return t.detach().to(torch.float64).reshape(-1).tolist()


def float32_values(t):
    return [float("%.9g" % v) for v in t.detach().to(torch.float32).reshape(-1).tolist()]


def make_case(seed, name, in_dim, out_dim, rank, alpha, use_bias, x_shape, quantize_base):
    # DoRALinear draws its base from nn.Linear's initialisation first: the same draw gives the unquantised weight.
    torch.manual_seed(seed)
    base_weight = torch.nn.Linear(in_dim, out_dim, bias=use_bias).weight.detach().clone()
    torch.manual_seed(seed)
    layer = DoRALinear(in_dim, out_dim, rank, alpha, dropout=0.0, use_bias=use_bias, quantize_base=quantize_base)
    with torch.no_grad():
        layer.lora_b.weight.normal_(0, 0.2)
    layer.initialize_dora_magnitude()
    magnitude_init = layer.magnitude.detach().clone()
    with torch.no_grad():
        layer.magnitude.mul_(1 + 0.1 * torch.randn(out_dim))
    x = torch.randn(*x_shape, requires_grad=True)
    grad_out = torch.randn(*x_shape[:-1], out_dim)
    out = layer(x)
    (out * grad_out).sum().backward()

    case = {
        "name": name,
        "in_dim": in_dim,
        "out_dim": out_dim,
        "rank": rank,
        "alpha": alpha,
        "use_bias": use_bias,
        "input_shape": x_shape,
        "quantize_base": quantize_base,
        "weight": float32_values(base_weight) if quantize_base else values(layer.weight),
        "lora_a": values(layer.lora_a.weight),
        "lora_b": values(layer.lora_b.weight),
        "magnitude_init": values(magnitude_init),
        "magnitude": values(layer.magnitude),
        "input": values(x),
        "grad_output": values(grad_out),
        "output": values(out),
        "grad": {
            "lora_a": values(layer.lora_a.weight.grad),
            "lora_b": values(layer.lora_b.weight.grad),
            "magnitude": values(layer.magnitude.grad),
            "input": values(x.grad),
        },
        "state_dict_keys": sorted(layer.state_dict().keys()),
        "adapter_params": layer.adapter_params(),
    }
    if quantize_base:
        assert layer.weight.grad is None
    else:
        assert torch.equal(base_weight, layer.weight.detach())
        case["grad"]["weight"] = values(layer.weight.grad)
        # get_merged_lora_ckpt finds modules by the name before ".lora_a.weight": give the layer one.
        state = {"layer." + k: v.detach().clone() for k, v in layer.state_dict().items()}
        case["merged_weight"] = values(get_merged_lora_ckpt(state, rank=rank, alpha=alpha)["layer.weight"])
    if use_bias:
        case["bias"] = values(layer.bias)
        case["grad"]["bias"] = values(layer.bias.grad)
    return case


def build():
    import torchtune

    cases = [make_case(seed, *c) for seed, c in enumerate(CASES)]
    return {
        "generator": "scripts/make_dora_fixtures.py",
        "torchtune": torchtune.__version__,
        "torch": torch.__version__.split("+")[0],
        "dtype": "float32",
        "cases": cases,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = parser.parse_args()
    text = json.dumps(build(), indent=1) + "\n"
    if args.check:
        with open(OUT) as f:
            same = f.read() == text
        print(f"{OUT}: {'up to date' if same else 'differs from what the script makes'}")
        return 0 if same else 1
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
