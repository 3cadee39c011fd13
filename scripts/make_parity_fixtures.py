#!/usr/bin/env python3
"""Writes the logits-parity fixtures under recipes/checkpoint/testdata/hf_parity/<family>/.

For each model family the C++ decoder covers, builds a small random model with the family's Hugging Face config
class, saves it with save_pretrained (safetensors; llama3_1 sharded, with model.safetensors.index.json), runs
fixed token ids through it in float32 with eager attention, and saves the ids and logits to expected.safetensors.
recipes/checkpoint/hf_parity_test.cc loads each folder through the Hugging Face checkpoint loader and compares.

Every parameter is redrawn after construction (norm weights and biases included, which transformers initialises
to constants) and the soft-caps and sliding windows are set small, so that each family option changes the logits.

Made once and committed; rerun only to change the fixtures. Needs Python 3.11 and, pinned:
    torch==2.11.0 (CPU is enough)  transformers==4.57.6  safetensors==0.8.0  numpy (for safetensors.torch)
e.g.  python3 -m venv /tmp/hf-venv && /tmp/hf-venv/bin/pip install torch==2.11.0 transformers==4.57.6 \\
      safetensors==0.8.0 numpy && /tmp/hf-venv/bin/python scripts/make_parity_fixtures.py [family ...]
Families named on the command line are remade alone (e.g. llama4); none: all.
"""

import copy
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

PINNED = {"torch": "2.11.0", "transformers": "4.57.6"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "checkpoint", "testdata",
                   "hf_parity")

# Shared tiny sizes: 2 layers, width 32, 4 query heads of 8, 2 kv heads, MLP 48, vocab 96; 2 x 12 tokens.
COMMON = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, pad_token_id=None, bos_token_id=1,
              eos_token_id=2)
BATCH, SEQ = 2, 12


def llama(**kw):
    return transformers.LlamaConfig(**{**COMMON, "tie_word_embeddings": False, **kw})


def llama3_rope(factor):
    # An original context of 256 puts the head_dim-8 wavelengths (6.3, 167, 4467, 118850) in all three regimes
    # (kept below 256/4, interpolated, scaled above 256), and the scaled ones turn noticeably within 12 tokens.
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256}


# family -> (config, max_shard_size or None). Comments name the options each fixture exercises.
FAMILIES = {
    # multi-head attention, RoPE base 10000, untied
    "llama2": (llama(num_key_value_heads=4, rope_theta=10000.0, rms_norm_eps=1e-5), None),
    # Code Llama: RoPE base 1e6
    "code_llama2": (llama(num_key_value_heads=4, rope_theta=1e6, rms_norm_eps=1e-5), None),
    # grouped-query attention, plain RoPE base 500000
    "llama3": (llama(rope_theta=500000.0), None),
    # Llama 3 RoPE scaling (factor 8; at head_dim 8 the four frequencies span the three regimes); sharded
    "llama3_1": (llama(rope_theta=500000.0, rope_scaling=llama3_rope(8.0), max_position_embeddings=1024), "20KB"),
    # factor 32, tied embeddings
    "llama3_2": (llama(rope_theta=500000.0, rope_scaling=llama3_rope(32.0), max_position_embeddings=1024,
                       tie_word_embeddings=True), None),
    "llama3_3": (llama(rope_theta=500000.0, rope_scaling=llama3_rope(8.0), max_position_embeddings=1024), None),
    # a 5-token sliding window on every layer
    "mistral": (transformers.MistralConfig(**{**COMMON, "sliding_window": 5, "rope_theta": 10000.0,
                                              "tie_word_embeddings": False}), None),
    # q/k/v biases, half-split RoPE, tied
    "qwen2": (transformers.Qwen2Config(**{**COMMON, "rope_theta": 1e6, "rms_norm_eps": 1e-6,
                                          "tie_word_embeddings": True}), None),
    # untied, as Qwen2.5 7B and up
    "qwen2_5": (transformers.Qwen2Config(**{**COMMON, "rope_theta": 1e6, "rms_norm_eps": 1e-6,
                                            "tie_word_embeddings": False}), None),
    # q/k RMSNorm, head_dim 16 (4 x 16 = 64 != width 32), tied
    "qwen3": (transformers.Qwen3Config(**{**COMMON, "head_dim": 16, "rope_theta": 1e6, "rms_norm_eps": 1e-6,
                                          "tie_word_embeddings": True}), None),
    # GeGLU, embeddings * sqrt(32), (1 + w) norms, one kv head (heads x head_dim = width, as Gemma 2B)
    "gemma": (transformers.GemmaConfig(**{**COMMON, "num_key_value_heads": 1, "head_dim": 8,
                                          "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6}), None),
    # Gemma's options plus post-norms, head_dim 16, score cap 5, logit cap 8, score scale 6^-0.5, 5-token window on layer 0
    "gemma2": (transformers.Gemma2Config(**{**COMMON, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
                                            "attn_logit_softcapping": 5.0, "final_logit_softcapping": 8.0,
                                            "query_pre_attn_scalar": 6, "sliding_window": 5,
                                            "rms_norm_eps": 1e-6}), None),
    # fused qkv_proj and gate_up_proj, half-split RoPE, a 5-token window, multi-head attention
    "phi3": (transformers.Phi3Config(**{**COMMON, "num_key_value_heads": 4, "sliding_window": 5,
                                        "rope_theta": 10000.0, "tie_word_embeddings": False}), None),
    # Phi-4: fused projections with grouped-query attention, RoPE base 250000, no window
    "phi4": (transformers.Phi3Config(**{**COMMON, "rope_theta": 250000.0, "tie_word_embeddings": False}), None),
    # Llama 4 (Scout's options, small): 2 layers, each a mixture of 4 experts (top-2 here, to sum two) and a shared
    # expert 32 wide, layer 1 without RoPE, layer 0 attending within 4-token chunks with the q/k L2 norm;
    # temperature tuning from position 3 (floor 4, scale 0.5); Scout's RoPE scaling (factor 16, low = high = 1)
    "llama4": (transformers.Llama4TextConfig(**{**COMMON, "num_hidden_layers": 2, "head_dim": 8,
                                                "intermediate_size": 32, "intermediate_size_mlp": 64,
                                                "num_local_experts": 4,
                                                "num_experts_per_tok": 2, "interleave_moe_layer_step": 1,
                                                "use_qk_norm": True, "no_rope_layer_interval": 2,
                                                "attention_chunk_size": 4, "attn_temperature_tuning": True,
                                                "floor_scale": 4, "attn_scale": 0.5, "rope_theta": 500000.0,
                                                "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                                                                 "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                                                                 "original_max_position_embeddings": 64},
                                                "tie_word_embeddings": False}), None),
}


# Options switched off one at a time, to show that each fixture is sensitive to them: the logits must move by far
# more than the 1e-4 the C++ test allows.
SENSITIVITY = {
    "code_llama2": {"rope_theta": 10000.0},
    "llama3_1": {"rope_scaling": None},
    "llama3_2": {"rope_scaling": None},
    "llama3_3": {"rope_scaling": None},
    "mistral": {"sliding_window": None},
    "gemma2": {"attn_logit_softcapping": None, "final_logit_softcapping": None, "sliding_window": 64,
               "query_pre_attn_scalar": 8},
    "phi3": {"sliding_window": None},
    "phi4": {"rope_theta": 10000.0},
    "llama4": {"attention_chunk_size": 64, "use_qk_norm": False, "attn_temperature_tuning": False,
               "num_experts_per_tok": 1},
}


def sensitivity(family, config, model, ids, logits):
    changes = []
    for key, value in SENSITIVITY.get(family, {}).items():
        other_config = copy.deepcopy(config)
        setattr(other_config, key, value)
        other = transformers.AutoModelForCausalLM.from_config(other_config, attn_implementation="eager").float().eval()
        other.load_state_dict(model.state_dict())
        with torch.no_grad():
            change = (other(input_ids=ids).logits.float() - logits).abs().max().item()
        if change < 1e-2:
            sys.exit(f"{family}: setting {key}={value} changes the logits by only {change}; the fixture is blind to it")
        changes.append(f"{key}={value}: {change:.3f}")
    return ", ".join(changes)


def randomize(model, generator):
    """Redraws every parameter: weights ~ N(0, 1/fan_in) scaled up, norm weights and biases around their
    neutral values, so the logits are O(1..10) and every tensor matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                neutral = 0.0 if "Gemma" in type(model).__name__ else 1.0
                p.copy_(neutral + 0.3 * torch.randn(p.shape, generator=generator))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
            elif p.dim() == 3:  # Llama 4's experts: [experts, in, out]
                p.copy_(1.5 * torch.randn(p.shape, generator=generator) / p.shape[-2] ** 0.5)
            else:
                p.copy_(1.5 * torch.randn(p.shape, generator=generator) / p.shape[-1] ** 0.5)


def main():
    for package, version in PINNED.items():
        found = getattr(sys.modules[package], "__version__").split("+")[0]
        if found != version:
            sys.exit(f"{package} {found} found; the fixtures are made with {version} (see the docstring)")
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[1:]  # families to (re)make; none: all
    for index, (family, (config, shard)) in enumerate(FAMILIES.items()):
        if only and family not in only:
            continue
        config._attn_implementation = "eager"
        config.torch_dtype = "float32"
        generator = torch.Generator().manual_seed(1000 + index)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
        randomize(model, generator)
        if config.tie_word_embeddings:
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        ids = torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=generator)
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        folder = os.path.join(OUT, family)
        shutil.rmtree(folder, ignore_errors=True)
        kwargs = {"max_shard_size": shard} if shard else {}
        model.save_pretrained(folder, safe_serialization=True, **kwargs)
        gen = os.path.join(folder, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        save_file({"input_ids": ids.contiguous(), "logits": logits.contiguous()},
                  os.path.join(folder, "expected.safetensors"),
                  metadata={"family": family, "transformers": transformers.__version__, "torch": torch.__version__})
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        print(f"{family:12s} {type(model).__name__:18s} {model.num_parameters():6d} params, "
              f"|logits| <= {logits.abs().max():5.2f}, {len(os.listdir(folder))} files, {size / 1024:3.0f} KiB"
              f"  {sensitivity(family, config, model, ids, logits)}")


if __name__ == "__main__":
    main()
