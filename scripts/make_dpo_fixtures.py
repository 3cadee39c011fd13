#!/usr/bin/env python3
"""Writes recipes/testdata/dpo_loss_torchtune_0_6_1.json: torchtune's DPO loss and sequence log-probabilities.

Two parts, both float32, made with torchtune 0.6.1:
  - "loss": torchtune.rlhf.loss.DPOLoss(beta, label_smoothing) on fixed policy and reference log-probabilities
    of chosen and rejected responses [B]: the per-pair losses, the chosen and rejected rewards, and the gradient
    of the losses' mean with respect to the policy's log-probabilities;
  - "log_probs": torchtune.rlhf.get_batch_log_probs on random logits [B, T, V] with labels [B, T] that are
    partly -100 (prompt and padding; labels are aligned with the tokens and shifted inside, as torchtune does).
recipes/loss_test.cc compares tune-matrix's DpoLoss and SequenceLogProbs with them.

Made once and committed; rerun only to change the fixture. Needs torchtune==0.6.1 (with torchao==0.11.0) and
torch 2.11.0, e.g. the reference venv of the project's notes:
    python3 -m venv /tmp/ref-venv && /tmp/ref-venv/bin/pip install torchtune==0.6.1 torchao==0.11.0 torch==2.11.0
    /tmp/ref-venv/bin/python scripts/make_dpo_fixtures.py
"""
import json
import os

import torch
import torchtune
from torchtune import rlhf
from torchtune.rlhf.loss import DPOLoss

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "testdata",
                   "dpo_loss_torchtune_0_6_1.json")


def loss_case(name, b, beta, label_smoothing, seed):
    g = torch.Generator().manual_seed(seed)
    # Sums of log-probabilities over a few dozen tokens: negative, tens of nats.
    policy_chosen = (-20 + 5 * torch.randn(b, generator=g)).requires_grad_(True)
    policy_rejected = (-20 + 5 * torch.randn(b, generator=g)).requires_grad_(True)
    ref_chosen = -20 + 5 * torch.randn(b, generator=g)
    ref_rejected = -20 + 5 * torch.randn(b, generator=g)
    loss_fn = DPOLoss(beta=beta, label_smoothing=label_smoothing)
    # 0.6.1's signature takes the four tensors (later versions wrap each pair in ChosenRejectedOutputs).
    losses, chosen_rewards, rejected_rewards = loss_fn(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    losses.mean().backward()
    return {"name": name, "beta": beta, "label_smoothing": label_smoothing,
            "policy_chosen": policy_chosen.tolist(), "policy_rejected": policy_rejected.tolist(),
            "ref_chosen": ref_chosen.tolist(), "ref_rejected": ref_rejected.tolist(),
            "losses": losses.tolist(), "chosen_rewards": chosen_rewards.tolist(),
            "rejected_rewards": rejected_rewards.tolist(), "grad_policy_chosen": policy_chosen.grad.tolist(),
            "grad_policy_rejected": policy_rejected.grad.tolist()}


def log_probs_case(name, b, t, v, masked, seed):
    g = torch.Generator().manual_seed(seed)
    logits = (2 * torch.randn(b, t, v, generator=g)).requires_grad_(True)
    labels = torch.randint(0, v, (b, t), generator=g)
    for row, start, end in masked:
        labels[row, start:end] = -100
    log_probs = rlhf.get_batch_log_probs(logits, labels)
    log_probs.sum().backward()
    return {"name": name, "logits": logits.tolist(), "labels": labels.tolist(), "log_probs": log_probs.tolist(),
            "grad": logits.grad.tolist()}


def main():
    assert torchtune.__version__.split("+")[0] == "0.6.1", torchtune.__version__
    loss = [loss_case("beta_0.1", 6, 0.1, 0.0, 1), loss_case("beta_0.5_smoothing_0.2", 5, 0.5, 0.2, 2),
            loss_case("beta_0.05", 4, 0.05, 0.0, 3)]
    # Row 0 has a masked prompt, row 1 padding at the end, row 2 both, row 3 nothing left to score.
    log_probs = [log_probs_case("masked", 4, 7, 11, [(0, 0, 3), (1, 5, 7), (2, 0, 2), (2, 6, 7), (3, 1, 7)], 4)]
    with open(OUT, "w") as f:
        json.dump({"torchtune": torchtune.__version__.split("+")[0], "torch": torch.__version__.split("+")[0],
                   "loss": loss, "log_probs": log_probs}, f)
        f.write("\n")
    print(OUT, [(c["name"], sum(c["losses"]) / len(c["losses"])) for c in loss],
          [(c["name"], c["log_probs"]) for c in log_probs])


if __name__ == "__main__":
    main()
