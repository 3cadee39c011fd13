"""Times greedy generation with a KV cache in the Python peers of tune-matrix: torchtune, and transformers.

benchmarks/peers/generate_side_by_side.py runs this next to tune-matrix's `generate` recipe.

Setup: torch.set_num_threads(--threads) and torch.manual_seed(--seed); the peer's modules are imported; then
(timed as "init_time_s", imports excluded) the model is built with random weights (no checkpoint) in --dtype,
and put in eval mode. The prompt is --prompt-tokens ids drawn once from a torch.Generator seeded with --seed,
uniform in [1, vocab) (never 0, torchtune's pad id), batch 1; what the ids are does not change the work.
  * torchtune 0.6.1, as its generate recipe (recipes/generate.py) does it: the builder (llama3_2_1b(),
    llama2_7b(), or the component builder at the tiny shape, or with --layers) under
    training.set_default_dtype(dtype); model.setup_caches(batch_size=1, dtype, decoder_max_seq_len=prompt +
    new tokens) (part of init_time_s; the recipe does it before its timer too); then, under
    torch.inference_mode(), the timed call is torchtune.generation.generate(model, prompt (torch.int),
    max_generated_tokens=N, pad_id=0, temperature=--temperature, top_k=--top-k, stop_tokens=[vocab]). The stop
    token is an id the model cannot emit: the recipe's stop-token bookkeeping runs every step, yet no run ends
    early. With temperature 0 torchtune's sample() divides by 1e-5, keeps the top_k, softmaxes and takes the
    argmax of probs / Exponential(1) noise: the most likely token, by the recipe's own arithmetic.
  * transformers: LlamaForCausalLM via AutoModelForCausalLM.from_config(LlamaConfig of the same shape,
    dtype=dtype); the timed call is model.generate(input_ids, attention_mask=ones, max_new_tokens=N,
    min_new_tokens=N (no early stop), do_sample=False, num_beams=1, use_cache=True, streamer=<timer>) with
    its default cache (DynamicCache) and attention (sdpa). Greedy: argmax of the float32 logits.

Timing (time.perf_counter, one reading per new token, so all three implementations give the same numbers as
tune-matrix's summary.json: a prefill and one time per later token):
  * torchtune: generate() calls the module-level generate_next_token for the prompt and for every later token
    (its custom_generate_next_token defaults to it), so that name is replaced by a wrapper that reads the clock
    when each call returns. time to first token = first return - the start of generate(); step i = return i -
    return i-1 (a forward of one token, sampling, and generate()'s bookkeeping between the calls).
  * transformers: a BaseStreamer whose put() reads the clock. generate() puts the prompt once, before the
    prefill, then each new token as it is chosen. time to first token = the first new token's put - the start of
    generate() (its cache and logits-processor set-up included); step i = put i - put i-1.
  generate_s is the whole call (returning included), and the brief's "decode rate = (new tokens - 1) /
  (generate_s - time to first token)" can be computed from it; the driver reports the median step instead,
  as tune-matrix does.

Output: exactly one JSON object, on the last line of stdout, with keys impl, model, dtype, layers, threads,
torch_version, peer_version, total_params (tied embeddings counted once), init_time_s, prompt_tokens,
new_tokens (counted from the output), time_to_first_token_s, step_times_s (new_tokens - 1 of them; the driver
treats the first as warm-up, as tune-matrix does), generate_s, max_rss_bytes (ru_maxrss of this process * 1024,
read at the end). Everything else goes to stderr. --max-new-tokens 0 only builds the model and prints the JSON.
"""
import argparse
import contextlib
import json
import resource
import sys
import time

import torch

# Each model: the shape both peers build (tune-matrix builds the same one from its presets).
MODELS = {
    # tune_matrix.models.tiny_llama3_2 (tiny/llama3_2_generation): 155,968 parameters.
    "tiny": dict(family="llama3_2", vocab=512, layers=2, heads=4, kv_heads=2, dim=64, hidden=256,
                 max_seq_len=512, rope_base=500_000, rope_scale=32, tied=True, params=155_968),
    # torchtune.models.llama3_2.llama3_2_1b: 1,235,814,400 parameters.
    "llama3_2_1b": dict(family="llama3_2", vocab=128_256, layers=16, heads=32, kv_heads=8, dim=2048, hidden=8192,
                        max_seq_len=131_072, rope_base=500_000, rope_scale=32, tied=True, params=1_235_814_400),
    # torchtune.models.llama2.llama2_7b: 6,738,415,616 parameters.
    "llama2_7b": dict(family="llama2", vocab=32_000, layers=32, heads=32, kv_heads=32, dim=4096, hidden=11008,
                      max_seq_len=4096, rope_base=10_000, rope_scale=None, tied=False, params=6_738_415_616),
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def build_torchtune(args, dtype, shape):
    """Returns (model, run(prompt) -> (ttft, steps, new_tokens), peer_version)."""
    import torchtune
    from torchtune import generation, training
    from torchtune.generation import _generation
    from torchtune.models import llama2, llama3_2

    with training.set_default_dtype(dtype), torch.device("cpu"):
        if args.model == "llama3_2_1b" and args.layers is None:
            model = llama3_2.llama3_2_1b()
        elif args.model == "llama2_7b" and args.layers is None:
            model = llama2.llama2_7b()
        elif shape["family"] == "llama3_2":
            model = llama3_2.llama3_2(
                vocab_size=shape["vocab"], num_layers=shape["layers"], num_heads=shape["heads"],
                num_kv_heads=shape["kv_heads"], embed_dim=shape["dim"], intermediate_dim=shape["hidden"],
                max_seq_len=shape["max_seq_len"], attn_dropout=0.0, norm_eps=1e-5, rope_base=shape["rope_base"],
                scale_factor=shape["rope_scale"], tie_word_embeddings=shape["tied"])
        else:
            model = llama2.llama2(
                vocab_size=shape["vocab"], num_layers=shape["layers"], num_heads=shape["heads"],
                num_kv_heads=shape["kv_heads"], embed_dim=shape["dim"], intermediate_dim=shape["hidden"],
                max_seq_len=shape["max_seq_len"], attn_dropout=0.0, norm_eps=1e-5, rope_base=shape["rope_base"])
    model.eval()
    if args.max_new_tokens > 0:
        with torch.device("cpu"):
            model.setup_caches(batch_size=1, dtype=dtype,
                               decoder_max_seq_len=args.prompt_tokens + args.max_new_tokens)

    stamps = []
    plain = _generation.generate_next_token

    def timed_generate_next_token(*a, **kw):
        out = plain(*a, **kw)
        stamps.append(time.perf_counter())
        return out

    # generate() looks the name up in its module's globals at call time, for the prompt and every later token.
    _generation.generate_next_token = timed_generate_next_token

    def run(prompt):
        stamps.clear()
        with torch.inference_mode():
            start = time.perf_counter()
            tokens, _ = generation.generate(
                model=model, prompt=prompt.to(torch.int), max_generated_tokens=args.max_new_tokens, pad_id=0,
                temperature=args.temperature, top_k=args.top_k, stop_tokens=[shape["vocab"]])
            tokens = tokens.tolist()
            end = time.perf_counter()
        new_tokens = len(tokens[0]) - prompt.numel()
        assert len(stamps) == new_tokens, f"{len(stamps)} generate_next_token calls for {new_tokens} new tokens"
        steps = [b - a for a, b in zip(stamps, stamps[1:])]
        return stamps[0] - start, steps, new_tokens, end - start

    return model, run, f"torchtune {torchtune.__version__}"


class ClockStreamer:
    """A transformers streamer that only reads the clock: the prompt's put, then one per new token."""

    def __init__(self):
        self.prompt_put = None
        self.stamps = []

    def put(self, value):
        now = time.perf_counter()
        if self.prompt_put is None:
            self.prompt_put = now
        else:
            self.stamps.append(now)
            assert value.numel() == 1, f"expected one new token per put, got {tuple(value.shape)}"

    def end(self):
        pass


def build_transformers(args, dtype, shape):
    """Returns (model, run(prompt) -> (ttft, steps, new_tokens), peer_version)."""
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.generation.streamers import BaseStreamer

    if shape["rope_scale"]:
        # transformers 5 takes rope_theta and the llama3 scaling inside rope_parameters (was rope_scaling).
        rope = {"rope_type": "llama3", "rope_theta": float(shape["rope_base"]), "factor": float(shape["rope_scale"]),
                "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    else:
        rope = {"rope_type": "default", "rope_theta": float(shape["rope_base"])}
    config = LlamaConfig(
        vocab_size=shape["vocab"], hidden_size=shape["dim"], intermediate_size=shape["hidden"],
        num_hidden_layers=args.layers or shape["layers"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], max_position_embeddings=shape["max_seq_len"], rms_norm_eps=1e-5,
        hidden_act="silu", tie_word_embeddings=shape["tied"], use_cache=True, rope_parameters=rope,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.eval()

    class Streamer(ClockStreamer, BaseStreamer):
        pass

    def run(prompt):
        streamer = Streamer()
        ids = prompt.view(1, -1).to(torch.long)
        start = time.perf_counter()
        out = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.max_new_tokens,
            min_new_tokens=args.max_new_tokens, do_sample=False, num_beams=1, use_cache=True, streamer=streamer,
            temperature=None, top_p=None, top_k=None, pad_token_id=0, eos_token_id=2, bos_token_id=1)
        tokens = out.tolist()
        end = time.perf_counter()
        new_tokens = len(tokens[0]) - ids.shape[1]
        stamps = streamer.stamps
        assert len(stamps) == new_tokens, f"{len(stamps)} streamed tokens for {new_tokens} new tokens"
        steps = [b - a for a, b in zip(stamps, stamps[1:])]
        return stamps[0] - start, steps, new_tokens, end - start

    return model, run, f"transformers {transformers.__version__}"


def import_peer(impl):
    """Imports the peer's modules up front so that init_time_s does not include import time."""
    if impl == "torchtune":
        import torchtune.generation  # noqa: F401
        import torchtune.models.llama2  # noqa: F401
        import torchtune.models.llama3_2  # noqa: F401
        import torchtune.training  # noqa: F401
    else:
        import transformers.generation.streamers  # noqa: F401
        import transformers.models.llama.modeling_llama  # noqa: F401  (transformers imports lazily)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=["torchtune", "transformers"], required=True)
    p.add_argument("--model", choices=list(MODELS), default="tiny")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=64, help="new tokens (all of them: no early stop); "
                   "0: build only")
    p.add_argument("--temperature", type=float, default=0.0, help="torchtune only (transformers is greedy)")
    p.add_argument("--top-k", type=int, default=300, help="torchtune only; 0: none")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--layers", type=int, default=None,
                   help="debug: this many decoder layers instead of the model's (a cheap check of the real path)")
    args = p.parse_args(argv)
    if args.prompt_tokens < 1 or args.max_new_tokens < 0:
        p.error("need --prompt-tokens >= 1 and --max-new-tokens >= 0")
    if args.top_k == 0:
        args.top_k = None
    return args


def main(argv=None):
    args = parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    shape = dict(MODELS[args.model])
    if args.layers is not None:
        shape["layers"] = args.layers
    if args.prompt_tokens + args.max_new_tokens > shape["max_seq_len"]:
        sys.exit(f"--prompt-tokens + --max-new-tokens pass the model's max_seq_len of {shape['max_seq_len']}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    # Library prints (if any) must not land on stdout, whose last line is the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        import_peer(args.impl)
        t0 = time.perf_counter()
        build = build_torchtune if args.impl == "torchtune" else build_transformers
        model, run, peer_version = build(args, dtype, shape)
        init_time = time.perf_counter() - t0
        total_params = sum(p.numel() for p in model.parameters())  # a tied weight once
        log(f"[peer_generate] {args.impl} {args.model} {args.dtype} ({shape['layers']} layers): "
            f"total_params={total_params:,} init_time_s={init_time:.3f}")
        if args.layers is None:
            assert total_params == shape["params"], (
                f"{args.model}: {total_params:,} parameters, tune-matrix builds {shape['params']:,}")
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
        assert dtypes == [str(dtype)], f"parameter dtypes {dtypes}, expected {dtype}"

        generator = torch.Generator().manual_seed(args.seed)
        prompt = torch.randint(1, shape["vocab"], (args.prompt_tokens,), generator=generator, dtype=torch.long)
        ttft, steps, new_tokens, generate_s = None, [], 0, 0.0
        if args.max_new_tokens > 0:
            ttft, steps, new_tokens, generate_s = run(prompt)
            assert new_tokens == args.max_new_tokens, f"{new_tokens} new tokens, asked for {args.max_new_tokens}"
            rest = sorted(steps[1:]) or [float("nan")]
            log(f"[peer_generate] {new_tokens} tokens: time to first token {ttft:.3f} s "
                f"({args.prompt_tokens / ttft:.1f} tokens/s), median decode step {rest[len(rest) // 2] * 1000:.2f} ms, "
                f"whole call {generate_s:.3f} s")

    result = {
        "impl": args.impl, "model": args.model, "dtype": args.dtype, "layers": shape["layers"],
        "threads": torch.get_num_threads(), "torch_version": torch.__version__, "peer_version": peer_version,
        "total_params": total_params, "init_time_s": init_time, "prompt_tokens": args.prompt_tokens,
        "new_tokens": new_tokens, "time_to_first_token_s": ttft, "step_times_s": steps, "generate_s": generate_s,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
