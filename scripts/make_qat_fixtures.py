#!/usr/bin/env python3
"""Writes recipes/models/testdata/fake_quant_torchao_0_11.safetensors: torchao 0.11's int8-dynamic-activation /
int4-weight fake quantisation (Int8DynActInt4WeightQATQuantizer, what torchtune 0.6.1's QAT recipes and configs
use) on fixed weights and activations; recipes/models/fake_quant_test.cc compares recipes/models/fake_quant.cc with
it.

Pinned versions (Python 3.11): torch==2.11.0 (the LibTorch tune-matrix builds with), torchao==0.11.0,
torchtune==0.6.1. Run it once in the throw-away virtual environment of the project's notes:
    /tmp/ref-venv/bin/python scripts/make_qat_fixtures.py
`--check` exits 1 when the committed file differs from what the script makes.

Tensors:
  weight.<case>.input / .fq         a weight [out, in] and its int4 per-group symmetric fake quantisation
                                    (case names end in _g<group size>)
  act.<case>.input / .fq            activations [..., in] and their int8 per-token asymmetric fake quantisation
  linear.{x, weight, grad_out, y, x_grad, weight_grad}
                                    Int8DynActInt4WeightQATLinear(64 -> 16, groupsize 32, bf16): its output and
                                    the gradients of sum(y * grad_out)
  lora.{x, weight, lora_a, lora_b, grad_out, y, x_grad, lora_a_grad, lora_b_grad}
                                    torchtune's QATLoRALinear (rank 4, alpha 8, groupsize 32, bf16) with those
                                    fake quantisers: fq(x) fq(W)^T + (alpha/rank) B A x, and its gradients
"""
import os
import sys

import torch
from torchao.quantization.qat import Int8DynActInt4WeightQATQuantizer
from torchao.quantization.qat.fake_quantizer import FakeQuantizer
from torchao.quantization.qat.linear import Int8DynActInt4WeightQATLinear
from torchtune.modules.peft.lora import QATLoRALinear

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_nf4_fixtures import write_or_check  # noqa: E402  (the same hand-written safetensors layout)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "recipes", "models", "testdata", "fake_quant_torchao_0_11.safetensors")


def weights(g):
    # Trained-model-like bf16 weights (std 0.02: many groups' scale is clamped to bf16's eps), with an all-zero
    # group, a group of tiny values and outliers; an fp32 weight with one group the whole row.
    w = torch.randn(16, 64, generator=g) * 0.02
    w[3, :32] = 0
    w[5, 32:] = 1e-4 * torch.randn(32, generator=g)
    w[7, 10] = 0.9
    w[9, 40] = -0.7
    yield "bf16_g32", w.to(torch.bfloat16), 32
    yield "bf16_g64", w.to(torch.bfloat16), 64
    yield "fp32_g64", torch.rand(8, 128, generator=g) * 2 - 1, 64
    yield "fp32_g128", torch.randn(4, 128, generator=g), 128


def activations(g):
    x = torch.randn(2, 5, 64, generator=g) * 3
    x[0, 1] = 0                      # an all-zero token
    x[0, 2] = x[0, 2].abs() + 0.5    # all positive: the zero point pins the minimum at 0
    x[1, 3] = -x[1, 3].abs() - 0.5   # all negative
    x[1, 4, 7] = 40                  # an outlier widens one token's range
    yield "bf16", x.to(torch.bfloat16)
    yield "fp32", torch.randn(3, 128, generator=g)


def tensors():
    g = torch.Generator().manual_seed(31)
    out = {}
    quantizer = Int8DynActInt4WeightQATQuantizer(groupsize=32)
    act_config = quantizer.get_activation_fake_quantize_config()
    for name, w, group in weights(g):
        config = Int8DynActInt4WeightQATQuantizer(groupsize=group).get_weight_fake_quantize_config()
        out[f"weight.{name}.input"] = w
        out[f"weight.{name}.fq"] = FakeQuantizer(config)(w).detach()
    for name, x in activations(g):
        out[f"act.{name}.input"] = x
        out[f"act.{name}.fq"] = FakeQuantizer(act_config)(x).detach()

    # The QAT linear of torchtune's full QAT recipes (quantizer.precision = the model's dtype).
    linear = Int8DynActInt4WeightQATLinear(64, 16, bias=False, groupsize=32, precision=torch.bfloat16)
    with torch.no_grad():
        linear.weight.copy_((torch.randn(16, 64, generator=g) * 0.05).to(torch.bfloat16))
    x = (torch.randn(3, 64, generator=g) * 2).to(torch.bfloat16).requires_grad_(True)
    grad_out = torch.randn(3, 16, generator=g).to(torch.bfloat16)
    y = linear(x)
    (y.float() * grad_out.float()).sum().backward()
    out.update({"linear.x": x.detach(), "linear.weight": linear.weight.detach(), "linear.grad_out": grad_out,
                "linear.y": y.detach(), "linear.x_grad": x.grad, "linear.weight_grad": linear.weight.grad})

    # QAT + LoRA: torchtune's QATLoRALinear with the same quantiser's configs.
    lora = QATLoRALinear(64, 16, rank=4, alpha=8.0, activation_qat_config=act_config,
                         weight_qat_config=quantizer.get_weight_fake_quantize_config()).to(torch.bfloat16)
    with torch.no_grad():
        lora.weight.copy_((torch.randn(16, 64, generator=g) * 0.05).to(torch.bfloat16))
        lora.lora_a.weight.copy_((torch.randn(4, 64, generator=g) * 0.1).to(torch.bfloat16))
        lora.lora_b.weight.copy_((torch.randn(16, 4, generator=g) * 0.1).to(torch.bfloat16))
    lora.weight.requires_grad_(False)
    x = (torch.randn(3, 64, generator=g) * 2).to(torch.bfloat16).requires_grad_(True)
    grad_out = torch.randn(3, 16, generator=g).to(torch.bfloat16)
    y = lora(x)
    (y.float() * grad_out.float()).sum().backward()
    out.update({"lora.x": x.detach(), "lora.weight": lora.weight.detach(),
                "lora.lora_a": lora.lora_a.weight.detach(), "lora.lora_b": lora.lora_b.weight.detach(),
                "lora.grad_out": grad_out, "lora.y": y.detach(), "lora.x_grad": x.grad,
                "lora.lora_a_grad": lora.lora_a.weight.grad, "lora.lora_b_grad": lora.lora_b.weight.grad})
    return out


def main():
    write_or_check(OUT, tensors, __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
