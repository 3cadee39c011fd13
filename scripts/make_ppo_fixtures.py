#!/usr/bin/env python3
"""Writes recipes/testdata/ppo_fixtures.json: torchtune's own PPO functions on fixed random inputs.

Run with any Python that has torch (e.g. ~/.cache/tune-matrix/venv-torch-2.11.0/bin/python) and torchtune's
source checked out (default /tmp/torchtune; state its commit in the fixture with --torchtune-commit):

    python3 scripts/make_ppo_fixtures.py --torchtune /tmp/torchtune --out recipes/testdata/ppo_fixtures.json

The rlhf files import only torch and two names of torchtune; those are stubbed, so torchtune's other
dependencies (torchao, torchdata) need not be installed. recipes/ppo_test.cc checks the C++ functions against the
values written here: the stop-token truncation, sequence lengths, reward penalty mask, rewards with the KL
penalty, GAE advantages and returns (whitened), and PPOLoss's terms.
"""
import argparse
import importlib.util
import json
import os
import sys
import types

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def torchtune_functions(root):
    """rewards.py, sequence_processing.py and loss/ppo.py from torchtune's source, with stub packages."""
    package = types.ModuleType("torchtune")
    data = types.ModuleType("torchtune.data")
    data.CROSS_ENTROPY_IGNORE_IDX = -100
    sys.modules["torchtune"] = package
    sys.modules["torchtune.data"] = data
    rlhf = types.ModuleType("torchtune.rlhf")
    sys.modules["torchtune.rlhf"] = rlhf
    package.rlhf = rlhf
    package.data = data
    rewards = load(os.path.join(root, "torchtune/rlhf/rewards.py"), "tt_rewards")
    for name in ("masked_mean", "masked_var", "whiten", "get_rewards_ppo", "estimate_advantages",
                 "get_reward_penalty_mask"):
        setattr(rlhf, name, getattr(rewards, name))
    sequences = load(os.path.join(root, "torchtune/rlhf/sequence_processing.py"), "tt_sequences")
    ppo = load(os.path.join(root, "torchtune/rlhf/loss/ppo.py"), "tt_ppo")
    pooling_src = open(os.path.join(root, "torchtune/training/pooling.py")).read()
    pooling = types.ModuleType("tt_pooling")
    exec(compile(pooling_src, "pooling.py", "exec"), pooling.__dict__)
    return rewards, sequences, ppo, pooling


def flat(t):
    t = t.detach()
    if t.dtype == torch.bool:
        return {"shape": list(t.shape), "values": [int(v) for v in t.flatten().tolist()]}
    if t.dtype in (torch.int64, torch.int32):
        return {"shape": list(t.shape), "values": [int(v) for v in t.flatten().tolist()]}
    return {"shape": list(t.shape), "values": [float(v) for v in t.double().flatten().tolist()]}


def case(rewards, sequences, ppo, pooling, seed, rows, length, options):
    g = torch.Generator().manual_seed(seed)
    stop = torch.tensor(options["stop_token_ids"])
    pad_id = options["pad_id"]
    responses = torch.randint(0, 12, (rows, length), generator=g)
    responses[0, 2] = int(stop[0])  # a stop early, one at the last position, one row without any
    responses[1, length - 1] = int(stop[-1])
    responses[2] = torch.where(torch.isin(responses[2], stop), torch.tensor(3), responses[2])
    original = responses.clone()
    padding, truncated = sequences.truncate_sequence_at_first_stop_token(responses.clone(), stop, pad_id)
    seq_lens = pooling.get_unmasked_sequence_lengths(padding)
    penalty = rewards.get_reward_penalty_mask(padding, seq_lens, options["penalise_no_eos"],
                                              options["min_response_length"])
    scores = torch.randn(rows, generator=g, dtype=torch.float64)
    scores_penalised = scores.clone()
    scores_penalised[penalty] = options["reward_penalty"]
    logprobs = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 3
    ref_logprobs = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 3
    logprobs[padding] = 1.0
    ref_logprobs[padding] = 1.0
    max_generated = length
    value_seq_idxs = torch.where((seq_lens > 0) & (seq_lens < max_generated - 1), seq_lens + 1, seq_lens)
    value_padding = padding.clone().scatter_(1, value_seq_idxs.unsqueeze(-1), False)
    values = torch.randn(rows, length, generator=g, dtype=torch.float64)
    values[value_padding] = 0.0
    total, kl, kl_reward = rewards.get_rewards_ppo(scores_penalised, logprobs, ref_logprobs, options["kl_coeff"],
                                                   value_seq_idxs)
    advantages, returns = rewards.estimate_advantages(values, total, options["gamma"], options["lmbda"],
                                                      masks=~padding)
    pi_logprobs = logprobs + 0.3 * torch.randn(rows, length, generator=g, dtype=torch.float64)
    pi_logprobs[padding] = 1.0
    phi_values = values + 0.4 * torch.randn(rows, length, generator=g, dtype=torch.float64)
    phi_values[value_padding] = 0.0
    loss_fn = ppo.PPOLoss(epsilon=options["epsilon"], value_clip_range=options["value_clip_range"],
                          value_coeff=options["value_coeff"])
    loss, policy_loss, value_loss, ratios, clipfrac = loss_fn(
        logprobs, pi_logprobs, advantages, values, phi_values, returns,
        padding_masks=~padding, value_padding_masks=~value_padding)
    return {
        "options": options,
        "responses": flat(original),
        "truncated": flat(truncated),
        "response_padding_masks": flat(padding),
        "seq_lens": flat(seq_lens),
        "reward_penalty_mask": flat(penalty),
        "scores": flat(scores),
        "scores_penalised": flat(scores_penalised),
        "value_seq_idxs": flat(value_seq_idxs),
        "value_padding_masks": flat(value_padding),
        "logprobs": flat(logprobs),
        "ref_logprobs": flat(ref_logprobs),
        "values": flat(values),
        "rewards": flat(total),
        "kl": flat(kl),
        "kl_reward": flat(kl_reward),
        "advantages": flat(advantages),
        "returns": flat(returns),
        "pi_logprobs": flat(pi_logprobs),
        "phi_values": flat(phi_values),
        "loss": float(loss), "policy_loss": float(policy_loss), "value_loss": float(value_loss),
        "ratios": float(ratios), "clipfrac": float(clipfrac),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torchtune", default="/tmp/torchtune")
    parser.add_argument("--torchtune-commit", default="")
    parser.add_argument("--out", default="recipes/testdata/ppo_fixtures.json")
    args = parser.parse_args()
    functions = torchtune_functions(args.torchtune)
    options = [
        {"stop_token_ids": [2, 7], "pad_id": 0, "penalise_no_eos": True, "min_response_length": 4,
         "reward_penalty": -3.0, "kl_coeff": 0.01, "gamma": 1.0, "lmbda": 0.95, "epsilon": 0.2,
         "value_clip_range": 0.2, "value_coeff": 0.1},
        {"stop_token_ids": [5], "pad_id": 1, "penalise_no_eos": False, "min_response_length": None,
         "reward_penalty": -1.0, "kl_coeff": 0.2, "gamma": 0.9, "lmbda": 0.8, "epsilon": 0.1,
         "value_clip_range": 0.5, "value_coeff": 0.3},
    ]
    cases = [case(*functions, seed=10 + i, rows=5, length=9, options=o) for i, o in enumerate(options)]
    fixture = {"source": "torchtune " + (args.torchtune_commit or "(commit not stated)") +
               ": torchtune/rlhf/rewards.py, sequence_processing.py, loss/ppo.py, training/pooling.py",
               "torch": torch.__version__, "cases": cases}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
