"""Times training steps of the Python peers of tune-matrix: torchtune, and transformers + peft.

A benchmark driver runs this next to tune-matrix's C++ recipes and compares the numbers side by side.

Setup: torch.set_num_threads(--threads) and torch.manual_seed(--seed); the peer's modules are imported; then
(timed as "init_time_s", imports excluded) the model is built with random weights (no checkpoint) and the
AdamW optimizer over its trainable parameters.
  * torchtune 0.6.1: llama3_2(...) / lora_llama3_2(...) from torchtune.models.llama3_2 (tiny), or
    llama3_2_1b() / lora_llama3_2_1b(...). bf16 builds under torchtune.training.set_default_dtype, so the
    LoRA adapters are bf16 too. LoRA freezes the base with get_adapter_params + set_trainable_params.
  * transformers + peft: LlamaForCausalLM from a LlamaConfig of the same shape (bf16 via from_config's
    dtype), LoRA via peft.get_peft_model. peft's default autocast_adapter_dtype=True upcasts bf16 adapters
    to fp32: with --dtype bf16 the frozen base is bf16 and the trainable LoRA weights are fp32.
  LoRA targets: q, v, output projections and the three MLP projections (torchtune q_proj/v_proj/output_proj
  + w1/w2/w3; HF q_proj/v_proj/o_proj + gate_proj/up_proj/down_proj). Embeddings are tied.
The batch is fixed: tokens [batch, seq] drawn once from a torch.Generator seeded with --seed, uniform in
[0, vocab); labels = tokens (every position labelled). Both impls therefore see the same batch.

One step (what each entry of "step_times_s" times with time.perf_counter, in tune-matrix's step order):
  optimizer.zero_grad(set_to_none=True); forward; loss; loss.backward(); loss.item();
  clip_grad_norm_(trainable params, --clip-grad-norm) unless "none"; optimizer.step().
  The optimizer is torch.optim.AdamW(trainable params, lr=--lr, weight_decay=0.01, fused=True), no scheduler.
  Loss = mean next-token cross entropy (position t predicts token t+1, the last position ignored):
  * torchtune: CEWithChunkedOutputLoss (torchtune's llama3_2 configs' loss) with
    model.set_num_output_chunks(loss.num_output_chunks); labels = cat(labels[:, 1:], ignore column),
    as torchtune's recipes shift them.
  * HF: model(input_ids=tokens, labels=tokens).loss (HF shifts inside; no attention mask, use_cache off).
  --activation-checkpointing: torchtune.training.set_activation_checkpointing on each
  TransformerSelfAttentionLayer / HF activation (gradient) checkpointing; both non-reentrant.

Output: exactly one JSON object, on the last line of stdout, with keys impl, model, mode, dtype, batch, seq,
threads, torch_version, peer_version, total_params, trainable_params (tied embeddings counted once),
init_time_s, step_times_s (every step, warm-up included), warmup, losses (one per step) and max_rss_bytes
(ru_maxrss of this process * 1024, read at the end). Everything else goes to stderr. --steps 0 only builds
the model and optimizer and prints the JSON (empty step_times_s and losses).
"""
import argparse
import contextlib
import json
import resource
import sys
import time

import torch

# Tiny Llama 3.2-shaped model, as tune-matrix's tiny configs build it.
TINY = dict(vocab=512, layers=2, heads=4, kv_heads=2, dim=64, hidden=256, max_seq_len=512)
# Parameter counts tune-matrix reports for the tiny model (full model, and with rank-8 LoRA).
TINY_FULL_PARAMS = 155_968
TINY_LORA_PARAMS = 20_992
# Llama-3.2-1B shape (transformers side; torchtune has its own llama3_2_1b builder).
LLAMA3_2_1B = dict(vocab=128_256, layers=16, heads=32, kv_heads=8, dim=2048, hidden=8192, max_seq_len=131_072)
ROPE_BASE, ROPE_SCALE = 500_000, 32


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def build_torchtune(args, dtype):
    """Returns (model, loss_fn, vocab, peer_version)."""
    import torchtune
    from torchtune import training
    from torchtune.models import llama3_2
    from torchtune.models.llama3_2 import _component_builders as builders
    from torchtune.modules import TransformerSelfAttentionLayer
    from torchtune.modules.loss import CEWithChunkedOutputLoss
    from torchtune.modules.peft import get_adapter_params, set_trainable_params

    lora = dict(lora_attn_modules=["q_proj", "v_proj", "output_proj"], apply_lora_to_mlp=True,
                apply_lora_to_output=False, lora_rank=args.lora_rank, lora_alpha=args.lora_alpha)
    with training.set_default_dtype(dtype):
        if args.model == "tiny":
            t = TINY
            shape = dict(vocab_size=t["vocab"], num_layers=t["layers"], num_heads=t["heads"],
                         num_kv_heads=t["kv_heads"], embed_dim=t["dim"], intermediate_dim=t["hidden"],
                         max_seq_len=t["max_seq_len"], norm_eps=1e-5, rope_base=ROPE_BASE,
                         scale_factor=ROPE_SCALE, tie_word_embeddings=True)
            model = builders.lora_llama3_2(**lora, **shape) if args.mode == "lora" else builders.llama3_2(**shape)
            vocab = t["vocab"]
        else:
            model = llama3_2.lora_llama3_2_1b(**lora) if args.mode == "lora" else llama3_2.llama3_2_1b()
            vocab = LLAMA3_2_1B["vocab"]
    if args.mode == "lora":
        set_trainable_params(model, get_adapter_params(model))
    if args.activation_checkpointing:
        training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})
    loss_fn = CEWithChunkedOutputLoss()
    model.set_num_output_chunks(loss_fn.num_output_chunks)
    model.train()

    def loss_of(tokens):
        logits = model(tokens)  # a list of num_output_chunks chunks along the sequence
        ignore = torch.full((tokens.shape[0], 1), loss_fn.ignore_index, dtype=tokens.dtype)
        labels = torch.cat([tokens[:, 1:], ignore], dim=1)
        return loss_fn(logits, labels)

    return model, loss_of, vocab, torchtune.__version__


def build_peft(args, dtype):
    """Returns (model, loss_fn, vocab, peer_version)."""
    import peft
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig

    t = TINY if args.model == "tiny" else LLAMA3_2_1B
    config = LlamaConfig(
        vocab_size=t["vocab"], hidden_size=t["dim"], intermediate_size=t["hidden"],
        num_hidden_layers=t["layers"], num_attention_heads=t["heads"], num_key_value_heads=t["kv_heads"],
        max_position_embeddings=t["max_seq_len"], rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=True, use_cache=False,
        # transformers 5 takes rope_theta and the llama3 scaling inside rope_parameters (was rope_scaling).
        rope_parameters={"rope_type": "llama3", "rope_theta": float(ROPE_BASE), "factor": float(ROPE_SCALE),
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192})
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if args.mode == "lora":
        lora_config = peft.LoraConfig(
            r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
            target_modules=["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
        model = peft.get_peft_model(model, lora_config)  # freezes the base; adapters upcast to fp32
    if args.activation_checkpointing:
        base = model.get_base_model() if args.mode == "lora" else model
        # transformers 5 renamed gradient_checkpointing_enable (now a deprecated alias).
        enable = getattr(base, "activation_checkpointing_enable", None) or base.gradient_checkpointing_enable
        enable()  # non-reentrant by default; also makes the embeddings' output require grad
    model.train()

    def loss_of(tokens):
        return model(input_ids=tokens, labels=tokens).loss

    return model, loss_of, t["vocab"], f"transformers {transformers.__version__} / peft {peft.__version__}"


def count_params(model):
    """(total, trainable); model.parameters() yields a tied weight once."""
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def dtypes_of(model):
    """{'frozen': {dtype: numel}, 'trainable': {dtype: numel}}, for the log."""
    out = {"frozen": {}, "trainable": {}}
    for p in model.parameters():
        d = out["trainable" if p.requires_grad else "frozen"]
        d[str(p.dtype)] = d.get(str(p.dtype), 0) + p.numel()
    return out


def import_peer(impl):
    """Imports the peer's modules up front so that init_time_s does not include import time."""
    if impl == "torchtune":
        import torchtune.models.llama3_2  # noqa: F401
        import torchtune.modules.loss  # noqa: F401
        import torchtune.modules.peft  # noqa: F401
        import torchtune.training  # noqa: F401
    else:
        import peft  # noqa: F401
        import transformers.models.llama.modeling_llama  # noqa: F401  (transformers imports lazily)


def clip_value(text):
    return None if text.lower() == "none" else float(text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=["torchtune", "peft"], required=True)
    p.add_argument("--model", choices=["tiny", "llama3_2_1b"], default="tiny")
    p.add_argument("--mode", choices=["lora", "full"], default="lora")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="timed steps, warm-up included; 0: build only")
    p.add_argument("--warmup", type=int, default=2, help="leading steps the driver should discard")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--clip-grad-norm", type=clip_value, default=1.0, help='max norm, or "none"')
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--activation-checkpointing", action="store_true")
    args = p.parse_args(argv)
    if args.steps < 0 or args.warmup < 0 or (args.steps > 0 and args.warmup > args.steps):
        p.error("need 0 <= --warmup <= --steps (or --steps 0)")
    return args


def main(argv=None):
    args = parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    # Library prints (if any) must not land on stdout, whose last line is the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        import_peer(args.impl)
        t0 = time.perf_counter()
        build = build_torchtune if args.impl == "torchtune" else build_peft
        model, loss_of, vocab, peer_version = build(args, dtype)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01, fused=True)
        init_time = time.perf_counter() - t0

        total_params, trainable_params = count_params(model)
        log(f"[peer_step] {args.impl} {args.model} {args.mode} {args.dtype}: total_params={total_params:,} "
            f"trainable_params={trainable_params:,} init_time_s={init_time:.3f}")
        log(f"[peer_step] parameter dtypes (numel): {dtypes_of(model)}")
        if args.model == "tiny" and args.lora_rank == 8:
            want = TINY_FULL_PARAMS + (TINY_LORA_PARAMS if args.mode == "lora" else 0)
            want_trainable = TINY_LORA_PARAMS if args.mode == "lora" else TINY_FULL_PARAMS
            assert (total_params, trainable_params) == (want, want_trainable), (
                f"tiny param counts {total_params}/{trainable_params} != tune-matrix's {want}/{want_trainable}")

        generator = torch.Generator().manual_seed(args.seed)
        tokens = torch.randint(0, vocab, (args.batch, args.seq), generator=generator, dtype=torch.long)

        step_times, losses = [], []
        for step in range(args.steps):
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of(tokens)
            loss.backward()
            loss_value = loss.item()
            if args.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(trainable, args.clip_grad_norm)
            optimizer.step()
            step_times.append(time.perf_counter() - start)
            losses.append(loss_value)
            log(f"[peer_step] step {step}: loss={loss_value:.4f} time_s={step_times[-1]:.4f}")

    result = {
        "impl": args.impl, "model": args.model, "mode": args.mode, "dtype": args.dtype,
        "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "torch_version": torch.__version__, "peer_version": peer_version,
        "total_params": total_params, "trainable_params": trainable_params,
        "init_time_s": init_time, "step_times_s": step_times, "warmup": args.warmup, "losses": losses,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
