#!/usr/bin/env python3
"""Writes recipes/testdata/kd_loss_torchtune_0_6_1.json: torchtune's forward-KL distillation loss on fixed logits.

torchtune 0.6.1's ForwardKLLoss (the per-token loss its knowledge_distillation recipes use; its
ForwardKLWithChunkedOutputLoss sums the same over chunks of the sequence) on random student and teacher logits
[N, V] in float32, with some labels ignored (-100) and some student logits -inf (which the loss masks), and its
gradient with respect to the student logits. recipes/loss_test.cc compares tune-matrix's ForwardKlLoss with them.

Made once and committed; rerun only to change the fixture. Needs torchtune==0.6.1 (with torchao==0.11.0) and
torch 2.11.0, e.g. the reference venv of the project's notes:
    python3 -m venv /tmp/ref-venv && /tmp/ref-venv/bin/pip install torchtune==0.6.1 torchao==0.11.0 torch==2.11.0
    /tmp/ref-venv/bin/python scripts/make_kd_fixtures.py
"""
import json
import os

import torch
import torchtune
from torchtune.modules.loss import ForwardKLLoss, ForwardKLWithChunkedOutputLoss

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "testdata",
                   "kd_loss_torchtune_0_6_1.json")


def case(name, n, v, ignored, inf, seed):
    g = torch.Generator().manual_seed(seed)
    student = (2 * torch.randn(n, v, generator=g)).requires_grad_(True)
    teacher = 2 * torch.randn(n, v, generator=g)
    labels = torch.randint(0, v, (n,), generator=g)
    labels[ignored] = -100
    with torch.no_grad():
        for row, col in inf:
            student[row, col] = float("-inf")
    loss = ForwardKLLoss()(student, teacher, labels)
    if loss.requires_grad:
        loss.backward()
        grad = torch.nan_to_num(student.grad, nan=0.0)
    else:  # every label ignored: torchtune returns a constant 0
        grad = torch.zeros_like(student)
    # The chunked loss over [1, n, v] in 2 chunks gives the same value.
    chunked = ForwardKLWithChunkedOutputLoss(num_output_chunks=2)(
        list(student.detach().view(1, n, v).chunk(2, dim=1)), list(teacher.view(1, n, v).chunk(2, dim=1)),
        labels.view(1, n))
    assert abs(chunked.item() - loss.item()) < 1e-5, (chunked.item(), loss.item())
    s = student.detach().clone()
    return {"name": name, "student": [[x if x != float("-inf") else "-inf" for x in r] for r in s.tolist()],
            "teacher": teacher.tolist(), "labels": labels.tolist(), "loss": loss.item(), "grad": grad.tolist()}


def main():
    assert torchtune.__version__.split("+")[0] == "0.6.1", torchtune.__version__
    cases = [case("plain", 6, 11, [], [], 1), case("ignored_and_inf", 8, 13, [0, 5], [(1, 3), (2, 0), (2, 7)], 2),
             case("all_ignored", 3, 5, [0, 1, 2], [], 3)]
    with open(OUT, "w") as f:
        json.dump({"torchtune": torchtune.__version__.split("+")[0], "torch": torch.__version__.split("+")[0], "cases": cases}, f)
        f.write("\n")
    print(OUT, [(c["name"], c["loss"]) for c in cases])


if __name__ == "__main__":
    main()
