#!/usr/bin/env python3
"""Writes tune-matrix's built-in configs that mirror torchtune's single-device and distributed configs, and the
tiny ones.

Maintainer tool, run once when torchtune's configs or the tiny presets change; what it writes is listed in
configs/MANIFEST (name, recipe and source of every built-in config), which recipes/ reads too, and its output
is committed under configs/. Tests never run it.

    python3 -m venv /tmp/genvenv && /tmp/genvenv/bin/pip install pyyaml
    /tmp/genvenv/bin/python scripts/make_builtin_configs.py /path/to/torchtune [--tune build/bin/tune]

What each recipe is (its task, whether it launches ranks, what it trains, on what data, its objective) comes from
`tune ls --json` of a build (default build/bin/tune), never from the recipe's name.

For each config the manifest says comes from torchtune it reads torchtune's values (model and its arguments, tokenizer,
checkpointer, dataset, optimizer, schedule, memory settings) and writes them in this project's layout, with
this project's comments; the metadata block of a config that already exists is kept, so its recorded support
survives until the next matrix run replaces it. Only values are taken from torchtune, no comments.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import textwrap

import yaml

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "MANIFEST")


def read_manifest(path=MANIFEST):
    """configs/MANIFEST's (name, recipe, source) lines; recipes/ reads the same file (harness/config_manifest.h)."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            columns = line.split("#", 1)[0].split()
            if not columns:
                continue
            if len(columns) != 3:
                sys.exit(f"{path}:{number}: expected 3 columns (name recipe source), found {len(columns)}")
            entries.append(tuple(columns))
    return entries


FAMILY_TITLE = {
    "llama2": "Llama 2", "code_llama2": "Code Llama 2", "llama3": "Llama 3", "llama3_1": "Llama 3.1",
    "llama3_2": "Llama 3.2", "llama3_3": "Llama 3.3", "mistral": "Mistral", "qwen2": "Qwen2",
    "qwen2_5": "Qwen2.5", "qwen3": "Qwen3", "gemma": "Gemma", "gemma2": "Gemma 2", "phi3": "Phi-3",
    "phi4": "Phi-4", "llama4": "Llama 4", "llama3_2_vision": "Llama 3.2 Vision",
}

# Our section order and the one comment each section gets. Keys not named here follow in torchtune's order.
SECTIONS = [
    ("Model", ["model", "policy_model"]),
    ("Tokenizer", ["tokenizer"]),
    ("Checkpoints", ["checkpointer", "resume_from_checkpoint", "save_adapter_weights_only"]),
    ("Data", ["dataset", "seed", "shuffle", "batch_size", "collate_fn"]),
    ("Optimizer and schedule", ["optimizer", "optimizer_in_bwd", "lr_scheduler", "loss"]),
    ("Training", ["epochs", "max_steps_per_epoch", "gradient_accumulation_steps", "clip_grad_norm", "compile"]),
    ("Logging", ["metric_logger", "log_every_n_steps", "log_peak_memory_stats", "log_level"]),
    ("Where and in what precision", ["device", "dtype"]),
    ("Memory", ["enable_activation_checkpointing", "enable_activation_offloading"]),
    ("Across ranks", ["data_parallel_shard_dim", "data_parallel_replicate_dim", "tensor_parallel_dim",
                      "tensor_parallel_plan", "fsdp_cpu_offload", "fsdp_reshard_after_forward",
                      "custom_sharded_layers"]),
    ("Validation", ["dataset_val", "run_val_every_n_steps", "batch_size_val"]),
    ("Profiling", ["profiler"]),
    ("Distillation", ["teacher_model", "teacher_checkpointer", "kd_loss", "kd_ratio"]),
    ("Preference (DPO)", ["ref_checkpointer"]),
    ("PPO (RLHF): the models beside the policy", ["reward_and_value_model", "ref_policy_checkpointer",
                                                  "value_checkpointer", "reward_checkpointer"]),
    ("PPO (RLHF): steps, generation, rewards and GAE", [
        "num_steps", "ppo_epochs", "ppo_batch_size", "forward_batch_size", "max_generated_tokens", "temperature",
        "top_k", "enable_kv_cache", "min_response_length", "penalise_no_eos", "reward_penalty", "stop_token_ids",
        "whiten_rewards", "gamma", "lmbda", "kl_coeff"]),
    ("Evaluation (EleutherAI's harness)", ["tasks", "limit", "max_seq_length", "batch_size", "enable_kv_cache",
                                           "apply_chat_template", "include_path", "quantizer"]),
    ("Generation", ["prompt", "max_new_tokens", "temperature", "top_k", "enable_kv_cache", "quantizer"]),
    ("Quantisation", ["quantizer", "fake_quant_after_n_steps"]),
]



class Recipe:
    """A recipe as `tune ls --json` describes it: name, task ("train", "generate", "quantize", "evaluate"),
    distributed (launches ranks), and a training recipe's trains ("full", "lora"), data ("samples",
    "preference_pairs", "prompts") and objective ("fine-tuning", "knowledge_distillation", "dpo", "qat", "ppo")."""

    def __init__(self, entry):
        self.name = entry["recipe"]
        self.task = entry["task"]
        self.distributed = entry["distributed"]
        self.trains, self.data, self.objective = entry["trains"], entry["data"], entry["objective"]
        self.fields = set(entry["fields"])  # its top-level config keys

    def __str__(self):
        return self.name


def read_recipes(tune):
    """Every recipe of `tune ls --json`, by name."""
    listed = subprocess.run([tune, "ls", "--json"], capture_output=True, text=True)
    if listed.returncode != 0:
        sys.exit(f"{tune} ls --json failed ({listed.returncode}): {listed.stderr.strip()}; build it first "
                 "(scripts/build.sh) or pass --tune")
    return {entry["recipe"]: Recipe(entry) for entry in json.loads(listed.stdout)}
# Our own one-line notes on keys a reader most often changes.
KEY_NOTES = {
    "lora_rank": "adapter rank: higher trains more parameters",
    "lora_alpha": "adapter scale is lora_alpha / lora_rank",
    "gradient_accumulation_steps": "effective batch = batch_size x this",
    "enable_activation_checkpointing": "recompute activations in backward: less memory, more time",
    "enable_activation_offloading": "keep saved activations in host memory (accelerators only)",
    "optimizer_in_bwd": "step each parameter during backward; needs gradient_accumulation_steps=1",
    "packed": "True: several samples per sequence",
    "device": "any device type or id: cpu, cuda, cuda:1, xpu, mps",
    "max_seq_len": "null: the longest sample sets the length",
    "max_new_tokens": "stops earlier at one of the tokenizer's stop tokens",
    "temperature": "0: always the most likely token (greedy)",
    "enable_kv_cache": "False: recompute the whole sequence for every token",
    "groupsize": "weights per int4 scale; must divide the layers' input widths",
    "fake_quant_after_n_steps": "train this many steps unquantised first; null: fake-quantise from the start",
}
PLAIN_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
BEGIN = "# --- BEGIN tune-matrix support metadata"


def scalar(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    if PLAIN_NUMBER.match(s) and not re.match(r"^0\d", s):
        # PyYAML (YAML 1.1) reads 5e-6 as a string; torchtune means a number: write it bare.
        return s
    if s == "" or s[0] in "!&*[]{}|>'\"%@`#,?:-" or ": " in s or " #" in s or s in ("True", "False", "null"):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if re.match(r"^\d", s):
        return '"' + s + '"'  # "00004": a string that reads as a number
    return s


def emit(key, value, indent, out, note=None, notes=None):
    notes = KEY_NOTES if notes is None else notes
    pad = "  " * indent
    tail = "  # " + note if note else ""
    if isinstance(value, dict):
        out.append(f"{pad}{key}:{tail}")
        comp = value.get("_component_")
        if comp is not None:
            out.append(f"{pad}  _component_: {scalar(comp)}")
        for k, v in value.items():
            if k != "_component_":
                emit(k, v, indent + 1, out, notes.get(k), notes)
    elif isinstance(value, list):
        out.append(f"{pad}{key}: [{', '.join(scalar(x) for x in value)}]{tail}")
    else:
        out.append(f"{pad}{key}: {scalar(value)}{tail}")


# What a generation config's notes say instead.
GENERATION_NOTES = {**KEY_NOTES, "max_seq_len": "null: no limit on the prompt's tokens"}
# And an evaluation config's.
EVAL_NOTES = {**KEY_NOTES, "max_seq_len": "null: texts are not cut (max_seq_length cuts each request)",
              "enable_kv_cache": "for generation tasks (none of the shipped tasks generates)",
              "limit": "documents per task: a count, or a fraction below 1; null: all",
              "max_seq_length": "input tokens per request at most (the model's max_seq_len caps it)"}


# The sections each kind of config leaves out: generation and evaluation configs' quantizer loads a quantised
# model, QAT's fake-quantises; an evaluation's batch_size is the harness's.
PPO_SECTIONS = ("PPO (RLHF): the models beside the policy", "PPO (RLHF): steps, generation, rewards and GAE")
SKIPPED = {"training": ("Generation", "Evaluation (EleutherAI's harness)"),
           "generation": ("Quantisation", "Evaluation (EleutherAI's harness)") + PPO_SECTIONS,
           "evaluation": ("Generation", "Quantisation") + PPO_SECTIONS}


def body(cfg, generation=False, evaluation=False):
    kind = "evaluation" if evaluation else "generation" if generation else "training"
    notes = EVAL_NOTES if evaluation else GENERATION_NOTES if generation else KEY_NOTES
    out = []
    emit("output_dir", cfg["output_dir"], 0, out,
         "summary.json and eval_results.json go here" if evaluation else
         "summary.json goes here" if generation else "checkpoints, logs and summary.json go here")
    done = {"output_dir"}
    for title, keys in SECTIONS:
        if title in SKIPPED[kind]:
            continue
        if evaluation and title == "Data":
            keys = ["seed"]
        present = [k for k in keys if k in cfg and k not in done]
        if not present:
            continue
        out.append("")
        out.append(f"# {title}")
        for k in present:
            emit(k, cfg[k], 0, out, notes.get(k), notes)
            done.add(k)
    rest = [k for k in cfg if k not in done]
    if rest:
        out.append("")
        out.append("# Other settings")
        for k in rest:
            emit(k, cfg[k], 0, out, notes.get(k), notes)
    return "\n".join(out) + "\n"


def existing_metadata(path):
    if not os.path.exists(path):
        return ""
    text = open(path, encoding="utf-8").read()
    i = text.find(BEGIN)
    return text[i:] if i >= 0 else ""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text += existing_metadata(path)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def torchtune_config(root, name):
    path = os.path.join(root, "recipes", "configs", name + ".yaml")
    raw = open(path, encoding="utf-8").read()
    cfg = yaml.safe_load(raw)
    # The download into the policy's checkpoint folder when the config fetches several models (PPO's reward model).
    ckpt_dir = str(cfg.get("checkpointer", {}).get("checkpoint_dir", "")).rstrip("/")
    downloads = re.findall(r"tune download (\S+)(?: --output-dir (\S+))?", raw)
    for repo, out in downloads:
        if out and out.rstrip("/") == ckpt_dir:
            return cfg, repo
    return cfg, (downloads[0][0] if downloads else None)


def generation_head(title, what, name, recipe, repo, ckpt_dir):
    """The comment at the top of a generation config."""
    launch = "tune run --nproc_per_node 2 " if recipe.distributed else "tune run "
    fetch = [
        "# Weights and tokenizer files are read from checkpointer.checkpoint_dir and the tokenizer's paths; fetch",
        f"# them first, for example: tune download {repo or '<model>'} --output-dir {ckpt_dir.rstrip('/')}",
        "# A matrix cell runs without them (--allow-stand-ins): the seed's weights and a shipped sample tokenizer",
        "# stand in, and the cell's record says so.",
    ] if repo is not None else [
        "# Weights start from `seed`; tokens are bytes.",
    ]
    return ["# " + line for line in textwrap.wrap(f"{title}: {what}", 114)] + [
        "# It prints the answer, the time to the first token, prefill and decode tokens/s, and peak memory.",
        "#",
    ] + fetch + [
        "#",
        "# Run it:",
        f"#   {launch}{recipe} --config {name}",
        "# Any field can be overridden on the command line, the device and the prompt too:",
        f"#   {launch}{recipe} --config {name} device=cpu prompt.user=\"Why is the sky blue?\" temperature=0",
        "",
    ]


def quantize_head(title, name, repo, ckpt_dir):
    """The comment at the top of a quantize config."""
    fetch = [
        "# Weights are read from checkpointer.checkpoint_dir; fetch them first, for example:",
        f"#   tune download {repo} --output-dir {ckpt_dir.rstrip('/')}",
        "# A matrix cell runs without them (--allow-stand-ins): the seed's weights stand in, and its record says so.",
    ] if repo is not None else ["# Weights start from `seed`."]
    return [
        f"# {title}: post-training quantisation to int4 weights in groups of quantizer.groupsize and int8 dynamic",
        "# activations (8da4w). It writes <output_dir>/<first checkpoint file's stem>-8da4w.safetensors, which the",
        "# generate recipe loads with the same quantizer (quantizer=<this quantizer>, checkpointer.checkpoint_dir=",
        "# <output_dir>, checkpointer.checkpoint_files=[<that file>]).",
        "#",
    ] + fetch + [
        "#",
        "# Run it:",
        f"#   tune run quantize --config {name}",
        "# Any field can be overridden on the command line, the device too:",
        f"#   tune run quantize --config {name} device=cpu quantizer.groupsize=128",
        "",
    ]


def eval_head(title, name, repo, ckpt_dir):
    """The comment at the top of an evaluation config."""
    what = (f"{title}: scored on EleutherAI's lm-evaluation-harness tasks (`tasks`) as the harness 0.4.8 scores "
            f"them, with the values of torchtune's {name} config. Multiple choice by log-likelihood on the shipped "
            "task sample (the first 40 of TruthfulQA's 817 questions; include_path: a folder with the whole split).")
    return ["# " + line for line in textwrap.wrap(what, 114)] + [
        "# It prints the harness's table and tokens/s, and writes summary.json (with the scores) and eval_results.json.",
        "#",
        "# Weights and tokenizer files are read from checkpointer.checkpoint_dir and the tokenizer's paths; fetch",
        f"# them first, for example: tune download {repo or '<model>'} --output-dir {ckpt_dir.rstrip('/')}",
        "# A matrix cell runs without them (--allow-stand-ins): the seed's weights and a shipped sample tokenizer",
        "# stand in, and the cell's record says so.",
        "#",
        "# Run it:",
        f"#   tune run eleuther_eval --config {name}",
        "# Any field can be overridden on the command line, the device too:",
        f"#   tune run eleuther_eval --config {name} device=cpu limit=8",
        "",
    ]


def model_title(component):
    """torchtune.models.qwen3.qwen3_0_6b_instruct -> Qwen3 0.6B instruct."""
    family, builder = component.split(".")[-2:]
    rest = builder[len(family) + 1:] if builder.startswith(family + "_") else builder
    rest = re.sub(r"(\d)_(\d)", r"\1.\2", rest)
    rest = re.sub(r"(\d)b\b", r"\1B", rest.replace("_", " "))
    return f"{FAMILY_TITLE[family]} {rest}"


def mirrored(root, source, name, recipe, configs_dir):
    cfg, repo = torchtune_config(root, source)
    model = cfg.get("model", {})
    if recipe.task == "evaluate":
        head = eval_head(model_title(model["_component_"]), name, repo,
                         cfg.get("checkpointer", {}).get("checkpoint_dir", ""))
        write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg, evaluation=True))
        return
    if recipe.task == "quantize":
        family, builder = model["_component_"].split(".")[-2:]
        title = f"{FAMILY_TITLE[family]} {builder.split('_')[-1].upper()}"
        head = quantize_head(title, name, repo or "meta-llama/Llama-2-7b-hf",
                             cfg.get("checkpointer", {}).get("checkpoint_dir", ""))
        write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg))
        return
    if recipe.task == "generate":
        # torchtune.models.llama2.llama2_7b -> Llama 2 7B
        family, builder = model["_component_"].split(".")[-2:]
        title = f"{FAMILY_TITLE[family]} {builder.split('_')[-1].upper()}"
        where = ("across ranks, each holding a share of every layer (tensor parallel)"
                 if recipe.distributed else "on one device")
        image = isinstance(cfg.get("prompt", {}).get("user"), dict) and "image" in cfg["prompt"]["user"]
        what = (f"{'generation from an image and a text' if image else 'text generation'} {where}, with the values "
                f"of torchtune's {source} config." + (" The image must be a local PNG or PPM file (prompt.user.image; a URL "
                                                      "is never fetched: a cell answers on a shipped image instead)."
                                                      if image else ""))
        head = generation_head(title, what, name, recipe, repo, cfg.get("checkpointer", {}).get("checkpoint_dir", ""))
        write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg, generation=True))
        return
    family, stem = name.split("/")
    size = stem.split("_")[0]
    distill = recipe.objective == "knowledge_distillation"
    if distill:  # 8B_to_1B_KD_lora_single_device: the teacher's size to the student's
        size = " to ".join(stem.split("_KD")[0].split("_to_"))
    quantized = bool(model.get("quantize_base")) or "qlora_" in str(model.get("_component_", ""))
    kind = "full"
    dpo = recipe.objective == "dpo"
    ppo = recipe.objective == "ppo"
    if recipe.trains == "lora" and not distill:
        kind = ("QDoRA" if quantized else "DoRA") if model.get("use_dora") else ("QLoRA" if quantized else "LoRA")
    training = ("quantisation-aware training (int8 activations, int4 weights)" if recipe.objective == "qat"
                else "fine-tuning")
    ckpt_dir = cfg.get("checkpointer", {}).get("checkpoint_dir", "")
    distributed = recipe.distributed
    where = "across ranks (processes, one device each)" if distributed else "on one device"
    launch = "tune run --nproc_per_node 2 " if distributed else "tune run "
    head = [
        (f"# {FAMILY_TITLE[family]} {size}: LoRA knowledge distillation {where}, with the values of torchtune's"
         if distill else f"# {FAMILY_TITLE[family]} {size}: {kind} DPO (direct preference optimization) {where}, with the values of torchtune's"
         if dpo else f"# {FAMILY_TITLE[family]} {size}: full PPO (RLHF against a reward model) {where}, with the values of torchtune's"
         if ppo else f"# {FAMILY_TITLE[family]} {size}: {kind} {training} {where}, with the values of torchtune's"),
        f"# {source} config (model, tokenizer, data, optimizer, schedule, memory settings).",
        "#",
        "# Weights and tokenizer files are read from checkpointer.checkpoint_dir and the tokenizer's paths; fetch",
        f"# them first, for example: tune download {repo or '<model>'} --output-dir {ckpt_dir.rstrip('/')}",
        "# A matrix cell runs without them (--allow-stand-ins): the seed's weights and a shipped sample tokenizer",
        "# and dataset stand in, and the cell's record says so.",
        "#",
        "# Run it:",
        f"#   {launch}{recipe} --config {name}",
        "# Any field can be overridden on the command line, the device too:",
        f"#   {launch}{recipe} --config {name} device=cpu max_steps_per_epoch=2",
        "",
    ]
    write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg))


def tiny_generation(family, name, recipe, configs_dir):
    cfg = {
        "output_dir": f"/tmp/tune_matrix/{name}",
        "model": {"_component_": f"tune_matrix.models.tiny_{family}"},
        "tokenizer": {"_component_": "tune_matrix.data.byte_tokenizer", "max_seq_len": None},
        "checkpointer": {"_component_": "tune_matrix.training.FullModelCheckpointer", "checkpoint_dir": None,
                         "checkpoint_files": ["model.safetensors"], "recipe_checkpoint": None,
                         "output_dir": "${output_dir}"},
        "seed": 1234, "log_level": "INFO", "device": "cuda", "dtype": "bf16",
        "prompt": {"system": None, "user": "Tell me a joke."},
        "max_new_tokens": 64, "temperature": 0.6, "top_k": 300,
    }
    int4 = name.endswith("_8da4w")
    if "enable_kv_cache" in recipe.fields:  # generate's; dev/generate_v2 has neither key
        cfg.update({"enable_kv_cache": True, "quantizer": None})
    if int4:
        # The quantize recipe's int4 model: without its checkpoint (a matrix cell) the seed's weights are
        # quantised the same way.
        cfg["checkpointer"]["checkpoint_files"] = ["model-8da4w.safetensors"]
        cfg["quantizer"] = {"_component_": "torchtune.training.quantization.Int8DynActInt4WeightQuantizer",
                            "groupsize": 32}
    if recipe.distributed:
        cfg["tensor_parallel_plan"] = {"_component_": "torchtune.models.llama3.base_llama_tp_plan"}
    if family == "llama3_2_vision":
        # A question on a shipped image (tune-matrix/tiny_vision), through the byte-level vision transform.
        cfg["tokenizer"] = {"_component_": "tune_matrix.data.byte_vision_transform", "image_size": 28,
                            "max_seq_len": None}
        cfg["prompt"]["user"] = {"image": "tune-matrix/tiny_vision/images/red_wide.ppm",
                                 "text": "What colour is the shape?"}
    what = (("generation from a shipped image and a question" if family == "llama3_2_vision" else "text generation") +
            " at a few hundred thousand parameters, so every device is checked in seconds" +
            (", from int4 weights and int8 activations (the checkpoint `tune run quantize --config tiny/quantize` "
             "writes; set checkpointer.checkpoint_dir to its output_dir)" if int4 else "") +
            (", tensor parallel over ranks." if recipe.distributed else "."))
    head = generation_head(f"A tiny {FAMILY_TITLE[family]}-shaped model", what, name, recipe, None, "")
    write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg, generation=True))


def vision(cfg, lora):
    """A tiny vision config's model, transform and data: every part trains (its adapters, or its weights)."""
    trainable = "lora" if lora else True
    cfg["model"].update({"decoder_trainable": trainable, "encoder_trainable": trainable,
                         "fusion_trainable": trainable, "image_size": 28})
    cfg["tokenizer"] = {"_component_": "tune_matrix.data.byte_vision_transform", "image_size": 28,
                        "max_seq_len": None}
    cfg["dataset"] = {"_component_": "torchtune.datasets.multimodal.the_cauldron_dataset",
                      "source": "tune-matrix/tiny_vision", "packed": False}
    cfg["collate_fn"] = "torchtune.data.padded_collate_tiled_images_and_mask"
    cfg["batch_size"] = 4


def tiny(family, name, recipe, configs_dir):
    if recipe.task == "generate":
        tiny_generation(family, name, recipe, configs_dir)
        return
    if recipe.task == "quantize":
        cfg = {
            "output_dir": f"/tmp/tune_matrix/{name}",
            "model": {"_component_": f"tune_matrix.models.tiny_{family}"},
            "checkpointer": {"_component_": "tune_matrix.training.FullModelCheckpointer", "checkpoint_dir": None,
                             "checkpoint_files": ["model.safetensors"], "recipe_checkpoint": None,
                             "output_dir": "${output_dir}"},
            "device": "cuda", "dtype": "bf16", "seed": 1234,
            "quantizer": {"_component_": "torchtune.training.quantization.Int8DynActInt4WeightQuantizer",
                          "groupsize": 32},
        }
        head = quantize_head(f"A tiny {FAMILY_TITLE[family]}-shaped model", name, None, "")
        write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg))
        return
    distill = recipe.objective == "knowledge_distillation"
    qat = recipe.objective == "qat"
    dpo = recipe.objective == "dpo"
    lora = recipe.trains == "lora"
    distributed = recipe.distributed
    model = {"_component_": f"tune_matrix.models.{'lora_' if lora else ''}tiny_{family}"}
    if lora:
        model.update({"lora_attn_modules": ["q_proj", "v_proj", "output_proj"], "apply_lora_to_mlp": True,
                      "lora_rank": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    cfg = {
        "output_dir": f"/tmp/tune_matrix/{name}",
        "model": model,
        "tokenizer": {"_component_": "tune_matrix.data.byte_tokenizer", "max_seq_len": None},
        "checkpointer": {"_component_": "tune_matrix.training.FullModelCheckpointer", "checkpoint_dir": None,
                         "checkpoint_files": ["model.safetensors"], "recipe_checkpoint": None,
                         "output_dir": "${output_dir}"},
        "resume_from_checkpoint": False,
        "dataset": {"_component_": "torchtune.datasets.alpaca_dataset", "source": "tune-matrix/tiny_instruct",
                    "train_on_input": False, "packed": False},
        "seed": 1234,
        "shuffle": True,
        "batch_size": 8,
        "optimizer": {"_component_": "torch.optim.AdamW", "fused": True, "weight_decay": 0.01,
                      "lr": "3e-3" if lora else "1e-3"},
        "lr_scheduler": {"_component_": "torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                         "num_warmup_steps": 10},
        "loss": {"_component_": "torchtune.modules.loss.LinearCrossEntropyLoss"},
        "epochs": 1, "max_steps_per_epoch": None, "gradient_accumulation_steps": 1, "clip_grad_norm": None,
        "compile": False,
        "metric_logger": {"_component_": "torchtune.training.metric_logging.DiskLogger",
                          "log_dir": "${output_dir}/logs"},
        "log_every_n_steps": 1, "log_peak_memory_stats": True, "log_level": "INFO",
        "device": "cuda", "dtype": "bf16",
        "enable_activation_checkpointing": False, "enable_activation_offloading": False,
    }
    if lora:
        cfg["save_adapter_weights_only"] = False
    if distill:
        # A teacher of another shape with the student's vocabulary (the tiny presets share it).
        cfg.update({"teacher_model": {"_component_": "tune_matrix.models.tiny_llama3"},
                    "teacher_checkpointer": {"_component_": "tune_matrix.training.FullModelCheckpointer",
                                             "checkpoint_dir": None, "checkpoint_files": ["model.safetensors"],
                                             "recipe_checkpoint": None, "output_dir": "${output_dir}"},
                    "kd_loss": {"_component_": "torchtune.modules.loss.ForwardKLWithChunkedOutputLoss"},
                    "kd_ratio": 0.5})
    if qat:
        # The tiny presets are 64 wide with 128-wide MLPs: groups of 32 fit every layer.
        cfg.update({"quantizer": {"_component_": "torchtune.training.quantization.Int8DynActInt4WeightQATQuantizer",
                                  "groupsize": 32},
                    "fake_quant_after_n_steps": None})
    if dpo:
        # Pairs of the shipped instruction set's answers and near misses; the reference is the starting model
        # (LoRA: adapters off; full: ref_checkpointer, the seed's weights like the policy's).
        cfg["dataset"] = {"_component_": "torchtune.datasets.hh_rlhf_helpful_dataset",
                          "source": "tune-matrix/tiny_preference", "train_on_input": False}
        cfg["loss"] = {"_component_": "torchtune.rlhf.loss.DPOLoss", "beta": 0.1, "label_smoothing": 0.0}
        if not lora:
            cfg["ref_checkpointer"] = dict(cfg["checkpointer"])
    if family == "llama3_2_vision":
        vision(cfg, lora)
    if distributed:
        cfg.update({"data_parallel_shard_dim": -1, "data_parallel_replicate_dim": 1, "fsdp_cpu_offload": False})
    launch = "tune run --nproc_per_node 2 " if distributed else "tune run "
    head = [
        f"# A tiny {FAMILY_TITLE[family]}-shaped model ({'LoRA knowledge distillation from a tiny Llama 3 teacher' if distill else ('LoRA' if lora else 'full') + ' DPO on preference pairs' if dpo else ('LoRA' if lora else 'full') + ' quantisation-aware training' if qat else 'LoRA fine-tuning' if lora else 'full fine-tuning'}): the family's operations at a",
        "# few hundred thousand parameters, so every device is checked on them in seconds.",
        "#",
        ("# Weights start from `seed`; data: the preference pairs shipped with tune-matrix, byte-level tokens." if dpo else
         "# Weights start from `seed`; data: the questions on images shipped with tune-matrix (tune-matrix/tiny_vision,\n"
         "# the Cauldron's layout), 28-pixel tiles and byte-level tokens." if family == "llama3_2_vision" else
         "# Weights start from `seed`; data: the instruction set shipped with tune-matrix, byte-level tokens."),
        "#",
        "# Run it:",
        f"#   {launch}{recipe} --config {name} device=cpu",
        "",
    ]
    write(os.path.join(configs_dir, name + ".yaml"), "\n".join(head) + "\n" + body(cfg))


def main():
    parser = argparse.ArgumentParser(description="Writes the built-in configs configs/MANIFEST lists.")
    parser.add_argument("torchtune", help="a pytorch/torchtune checkout")
    parser.add_argument("--tune", default=os.path.join(os.path.dirname(MANIFEST), "..", "build", "bin", "tune"),
                        help="the tune binary whose `tune ls --json` says what each recipe is (default build/bin/tune)")
    args = parser.parse_args()
    root = args.torchtune
    recipes = read_recipes(args.tune)
    configs_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs")
    count = 0
    for name, recipe_name, source in read_manifest():
        if source == "hand":
            continue
        if recipe_name not in recipes:
            sys.exit(f"{MANIFEST}: '{name}' names recipe '{recipe_name}', which `tune ls --json` does not list")
        recipe = recipes[recipe_name]
        if source == "torchtune" or source.startswith("torchtune:"):
            mirrored(root, source.partition(":")[2] or name, name, recipe, configs_dir)
        elif source.startswith("tiny:"):
            tiny(source[len("tiny:"):], name, recipe, configs_dir)
        else:
            sys.exit(f"{MANIFEST}: unknown source '{source}' for '{name}'")
        count += 1
    print(f"wrote {count} configs under {os.path.normpath(configs_dir)}")


if __name__ == "__main__":
    main()
