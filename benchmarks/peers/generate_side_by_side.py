#!/usr/bin/env python3
"""Greedy generation with a KV cache: tune-matrix's `generate` recipe next to torchtune 0.6.1 and transformers.

    python3 benchmarks/peers/generate_side_by_side.py                    # tiny + Llama 3.2 1B, 1 round, 2 threads
    python3 benchmarks/peers/generate_side_by_side.py --cases tiny --rounds 3 --out /tmp/gen.json
    python3 benchmarks/peers/generate_side_by_side.py --report benchmarks/peers/results/<file>.json

What runs: for each case (below) and round, the three implementations one after the other, each in its own
process (the order rotates from round to round; in the first round tune-matrix runs first, and the peers take
its prompt length), never two at a time, all with the same thread count (OMP_NUM_THREADS and
torch.set_num_threads = --threads), bf16, random weights, batch 1, the same prompt length in tokens and the same
number of new tokens, every one of them generated (no early stop):
  * tune-matrix: `build/bin/tune run generate --config <built-in config> --allow-stand-ins --force` with
    device=cpu, checkpointer.checkpoint_dir=null (the seed's weights), temperature=0 (greedy: the argmax),
    top_k=300 (the config's; unused when greedy), a fixed prompt (PROMPT below, as prompt.user, no system
    prompt) and max_new_tokens=N; a missing tokenizer file is replaced by the shipped sample (--allow-stand-ins),
    which changes the prompt's length, not the work per token. Its numbers come from the run's summary.json.
    It can stop early only at one of the tokenizer's stop tokens (random weights picked none in the tiny
    case, nor in the 1B case's first tokens); a run that does is an error naming --seed as the way out.
  * torchtune and transformers: benchmarks/peers/peer_generate.py (the same model shape and dtype, a prompt of
    random ids of tune-matrix's prompt length; torchtune through torchtune.generation.generate with
    temperature 0 and top_k 300, as its generate recipe calls it; transformers through model.generate with
    do_sample=False, use_cache=True and min_new_tokens = max_new_tokens; see its docstring).
Timing: every implementation gives a time to first token (the prefill: the prompt's forward and the first
token's choice) and one time per later token (a decode step: one token's forward, its choice and the loop's
bookkeeping), read when each token is chosen (tune-matrix's own clock in models/generation.cc; a wrapper around
torchtune's generate_next_token; a transformers streamer). The first decode step is warm-up, as in
tune-matrix's summary. Per implementation (rounds pooled):
  * decode tokens/s: 1 / the median decode step after warm-up (tune-matrix's summary reports the same
    statistic as tokens_per_second; the two are checked to agree); "mean" is the steps after warm-up over
    their sum; the JSON's summary also has the peers' whole-call rate, (new tokens - 1) / (generate() call -
    time to first token), warm-up step included;
  * step ratio: the peer's median decode step over tune-matrix's (above 1: the peer decodes slower);
  * time to first token (median over rounds) and prefill tokens/s = prompt tokens / that time;
  * peak memory: each child's maximum resident set (ru_maxrss from wait4), the same reading for all three;
  * start-up: the child's wall time minus its generation (time to first token + decode steps): process start,
    imports, building the random model, the tokenizer (tune-matrix), the KV cache set-up, and exit.

The peers live in the two virtual environments of peers/side_by_side.py, made once by that script's code under
~/.cache/tune-matrix/ from PyPI with pinned versions and pointed at tune-matrix's torch venv (a .pth file), so
all three run the same torch build.

A busy machine matters more here than for training steps: with 2 threads and other processes on the cores, a
Python peer's steps were seen to jump from about 1 ms to about 120 ms for a whole run (libgomp's spinning
threads sharing a core; tune-matrix too, less often; OMP_WAIT_POLICY=passive, --omp-wait-policy passive,
avoided it). The load average at the start is recorded and a warning printed when it is above --threads.

Writes a JSON file with every measurement (--out) and prints a Markdown table with the ratios.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ in the checkout
import side_by_side as sbs  # noqa: E402  (the peers' venvs)

ROOT = sbs.ROOT
IMPLS = ["tune-matrix", "torchtune", "transformers"]
VENV_OF = {"torchtune": "torchtune", "transformers": "peft"}  # side_by_side.py's venv names

# The prompt every case generates from (tune-matrix tokenizes it in the config's chat format; its token count
# is the peers' prompt length). No colons: it goes through a key=value override.
PROMPT = ("Write a short story about a lighthouse keeper who finds a message in a bottle. Describe the storm "
          "that brought it, the words written inside, and what the keeper decides to do next.")

# Each case: tune-matrix's built-in config and overrides, the peers' model (peer_generate.py MODELS), new
# tokens, and the prompt length the peers use when tune-matrix does not run (what tune-matrix's tokenizer, or
# the shipped sample standing in for it, made of PROMPT).
CASES = {
    # The tiny Llama 3.2-shaped model (155,968 parameters) and the byte tokenizer: seconds, a self-check.
    "tiny": dict(config="tiny/llama3_2_generation", model="tiny", max_new_tokens=64, prompt_tokens=181,
                 overrides=[]),
    # Llama 3.2 1B (tune-matrix has no built-in 1B generation config: the tiny one with the 1B model and the
    # Llama 3 tokenizer at torchtune's path; absent, the shipped tiktoken sample stands in). About 2.5 GB of
    # bf16 weights; a few minutes per implementation on 2 cores.
    "llama3_2_1b": dict(
        config="tiny/llama3_2_generation", model="llama3_2_1b", max_new_tokens=128, prompt_tokens=68,
        overrides=["model._component_=torchtune.models.llama3_2.llama3_2_1b",
                   "tokenizer._component_=torchtune.models.llama3.llama3_tokenizer",
                   "tokenizer.path=/tmp/Llama-3.2-1B-Instruct/original/tokenizer.model"]),
    # Llama 2 7B, the built-in `generation` config (torchtune's): 13.5 GB of bf16 weights per process, one at a
    # time; not in the default run (model building and decoding take many minutes per implementation on 2
    # cores). prompt_tokens: the stand-in SentencePiece sample's count (checked with tiny/llama2_generation,
    # model.vocab_size=32000 and this tokenizer); a run with tune-matrix uses tune-matrix's count.
    "llama2_7b": dict(config="generation", model="llama2_7b", max_new_tokens=32, prompt_tokens=56, overrides=[]),
}
TOP_K = 300  # the configs' top_k: torchtune applies it even when greedy, tune-matrix does not need to


def log(*args):
    print("[generate_side_by_side]", *args, file=sys.stderr, flush=True)


def git_commit():
    try:
        return subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_child(argv, env):
    """Runs argv (no shell); returns (stdout, wall seconds, ru_maxrss in bytes). side_by_side.py's run_child,
    but both streams go to files (no pipe to fill) and are decoded leniently: text generated from random
    weights need not be valid UTF-8."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} exited with {proc.returncode}:\n{errors[-3000:]}\n{text[-2000:]}")
    return text, wall, usage.ru_maxrss * 1024  # Linux reports kilobytes


def run_tune_matrix(case, args, env, work, max_new):
    out_dir = Path(work) / "tune-matrix"
    argv = [str(args.build / "bin" / "tune"), "run", "generate", "--config", case["config"], "--allow-stand-ins",
            "--force", f"output_dir={out_dir}", "device=cpu", f"dtype={args.dtype}", "checkpointer.checkpoint_dir=null",
            f"seed={args.seed}", "temperature=0", f"top_k={TOP_K}", f"max_new_tokens={max_new}",
            "enable_kv_cache=True", "prompt.system=null", f"prompt.user={PROMPT}", *case["overrides"]]
    text, wall, rss = run_child(argv, env)
    summary = json.loads((out_dir / "summary.json").read_text())
    match = re.search(r"^Prompt: (\d+) tokens", text, re.M)
    if not match:
        sys.exit(f"tune run generate printed no 'Prompt: N tokens' line:\n{text[-2000:]}")
    steps = summary["step_times_s"]
    if len(steps) + 1 != max_new:
        sys.exit(f"tune-matrix generated {len(steps) + 1} of {max_new} tokens: a stop token came early "
                 "(pass another --seed)")
    if summary.get("threads") != args.threads:
        sys.exit(f"tune-matrix ran {summary.get('threads')} threads, not {args.threads}")
    return dict(prompt_tokens=int(match.group(1)), time_to_first_token_s=summary["time_to_first_token_s"],
                step_times_s=steps, summary_tokens_per_second=summary.get("tokens_per_second"),
                init_time_s=summary.get("init_time_s"), wall_s=wall, max_rss_bytes=rss,
                total_params=summary["total_parameters"], stand_ins=summary.get("stand_ins", []),
                version=f"tune-matrix {git_commit()}, torch {summary.get('torch_version', '')}")


def run_peer(name, python, case, args, env, prompt_tokens, max_new):
    argv = [str(python), str(ROOT / "benchmarks" / "peers" / "peer_generate.py"), "--impl", name,
            "--model", case["model"], "--dtype", args.dtype, "--prompt-tokens", str(prompt_tokens),
            "--max-new-tokens", str(max_new), "--temperature", "0", "--top-k", str(TOP_K),
            "--threads", str(args.threads), "--seed", str(args.seed)]
    if args.layers is not None:
        argv += ["--layers", str(args.layers)]
    text, wall, rss = run_child(argv, env)
    r = json.loads(text.strip().splitlines()[-1])
    if r["threads"] != args.threads:
        sys.exit(f"{name} ran {r['threads']} threads, not {args.threads}")
    return dict(prompt_tokens=r["prompt_tokens"], time_to_first_token_s=r["time_to_first_token_s"],
                step_times_s=r["step_times_s"], generate_s=r["generate_s"], init_time_s=r["init_time_s"],
                wall_s=wall, max_rss_bytes=rss, total_params=r["total_params"], layers=r["layers"],
                version=r["peer_version"])


def summarise(runs):
    """Median post-warm-up decode step over every round's steps, and the rest of a table row."""
    steps = [t for r in runs for t in r["step_times_s"][1:]]
    if not steps:
        sys.exit("no decode steps after warm-up: use --max-new-tokens 3 or more")
    median = statistics.median(steps)
    mad = statistics.median(abs(t - median) for t in steps)
    ttft = statistics.median(r["time_to_first_token_s"] for r in runs)
    startup = statistics.median(r["wall_s"] - r["time_to_first_token_s"] - sum(r["step_times_s"]) for r in runs)
    return dict(decode_step_median_s=median, decode_step_mad_s=mad, steps_timed=len(steps),
                decode_tokens_per_s=1 / median, decode_tokens_per_s_mean=len(steps) / sum(steps),
                time_to_first_token_s=ttft, prefill_tokens_per_s=runs[0]["prompt_tokens"] / ttft,
                max_rss_bytes=max(r["max_rss_bytes"] for r in runs), startup_s=startup,
                init_time_s=statistics.median(r["init_time_s"] for r in runs),
                # the peers' whole call: (new tokens - 1) / (call - time to first token), median over rounds
                decode_tokens_per_s_whole_call=statistics.median(
                    len(r["step_times_s"]) / (r["generate_s"] - r["time_to_first_token_s"]) for r in runs)
                if all("generate_s" in r for r in runs) else None,
                total_params=runs[0]["total_params"], version=runs[0]["version"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="tiny,llama3_2_1b",
                   help=f"comma-separated, of: {', '.join(CASES)} (default: %(default)s)")
    p.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of %(default)s")
    p.add_argument("--rounds", type=int, default=1, help="runs of each implementation per case (default 1)")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads of every child (default 2)")
    p.add_argument("--max-new-tokens", type=int, help="new tokens for every case (default: the case's)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--omp-wait-policy", choices=["passive", "active"],
                   help="OMP_WAIT_POLICY of every child (default: unset, libgomp's own spinning)")
    p.add_argument("--layers", type=int,
                   help="debug, peers only: models with this many decoder layers (tune-matrix has no such override)")
    p.add_argument("--build", type=Path, default=ROOT / "build", help="CMake build folder (default: build)")
    p.add_argument("--out", type=Path, help="results JSON (default: benchmarks/peers/results/"
                   "<UTC time>-<commit>-generate-<cases>.json)")
    p.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                   help="run nothing: print the table of results files written by --out (several: one table each)")
    args = p.parse_args()
    if args.report:
        for path in args.report:
            result = json.loads(path.read_text())
            print_table(result, [i for i in IMPLS if any(i in c["summary"] for c in result["cases"].values())])
            print()
        return
    cases = args.cases.split(",")
    impls = [i for i in IMPLS if i in args.impls.split(",")]  # tune-matrix first in the first round
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c}; use one of {', '.join(CASES)}")
    for i in args.impls.split(","):
        if i not in IMPLS:
            sys.exit(f"unknown implementation {i}; use one of {', '.join(IMPLS)}")
    if args.layers is not None and "tune-matrix" in impls:
        sys.exit("--layers changes only the peers' models: pass --impls torchtune,transformers with it")
    if args.max_new_tokens is not None and args.max_new_tokens < 3:
        sys.exit("--max-new-tokens must be at least 3 (the first decode step is warm-up)")
    commit = git_commit()
    if args.out is None:
        args.out = (ROOT / "benchmarks" / "peers" / "results" /
                    f"{time.strftime('%Y-%m-%dT%H%M', time.gmtime())}-{commit}-generate-{'_'.join(cases)}.json")
    pythons = {i: sbs.ensure_peer_venv(VENV_OF[i]) for i in impls if i != "tune-matrix"}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    env.pop("OMP_WAIT_POLICY", None)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    load = os.getloadavg()[0]
    if load > args.threads:
        log(f"warning: load average {load:.1f} over {args.threads} thread(s): other processes share the cores, "
            "and the peers' steps can come out many times slower; run on a quiet machine")
    result = dict(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=commit, threads=args.threads,
                  dtype=args.dtype, rounds=args.rounds, seed=args.seed, layers=args.layers,
                  omp_wait_policy=args.omp_wait_policy, prompt=PROMPT,
                  load_average_at_start=load, cases={})
    for name in cases:
        case = CASES[name]
        max_new = args.max_new_tokens or case["max_new_tokens"]
        prompt_tokens = case["prompt_tokens"]
        runs = {i: [] for i in impls}
        for rnd in range(args.rounds):
            order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
            for impl in order:
                log(f"{name} round {rnd + 1}/{args.rounds}: {impl}")
                with tempfile.TemporaryDirectory() as work:
                    if impl == "tune-matrix":
                        r = run_tune_matrix(case, args, env, work, max_new)
                        if r["prompt_tokens"] != prompt_tokens:
                            log(f"  prompt: {r['prompt_tokens']} tokens (the case says {prompt_tokens}); "
                                "the peers take tune-matrix's")
                            prompt_tokens = r["prompt_tokens"]
                        if r["stand_ins"]:
                            log(f"  stand-ins: {'; '.join(r['stand_ins'])}")
                    else:
                        r = run_peer(impl, pythons[impl], case, args, env, prompt_tokens, max_new)
                runs[impl].append(r)
                rest = sorted(r["step_times_s"][1:])
                log(f"  prompt {r['prompt_tokens']} tokens, time to first token {r['time_to_first_token_s']:.3f} s, "
                    f"median decode step {rest[len(rest) // 2] * 1000:.2f} ms, "
                    f"peak {r['max_rss_bytes'] / 2**30:.2f} GiB, wall {r['wall_s']:.1f} s")
        summary = {i: summarise(runs[i]) for i in impls}
        ours = summary.get("tune-matrix")
        if ours:
            reported = statistics.median(r["summary_tokens_per_second"] for r in runs["tune-matrix"])
            if args.rounds == 1 and abs(reported - ours["decode_tokens_per_s"]) > 1e-6 * reported:
                log(f"  note: summary.json's tokens_per_second {reported:.3f} differs from 1 / median step "
                    f"{ours['decode_tokens_per_s']:.3f}")
        result["cases"][name] = dict(config=case["config"], model=case["model"], overrides=case["overrides"],
                                     prompt_tokens=prompt_tokens, max_new_tokens=max_new, runs=runs,
                                     summary=summary)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")  # after every case: a long run keeps its part
    print_table(result, impls)
    log(f"wrote {args.out}")


def seconds(s):
    return f"{s:.2f} s" if s >= 1 else f"{s * 1000:.1f} ms" if s >= 0.01 else f"{s * 1000:.2f} ms"


def print_table(result, impls):
    layers = f", {result['layers']} layer(s) (debug)" if result.get("layers") else ""
    if result.get("omp_wait_policy"):
        layers += f", OMP_WAIT_POLICY={result['omp_wait_policy']}"
    print(f"{result['dtype']}, batch 1, greedy, {result['threads']} thread(s), {result['rounds']} round(s){layers}, "
          f"{result['date']}, commit {result['commit']}, load average at start {result['load_average_at_start']:.1f}")
    print()
    print("| case | implementation | decode tokens/s (median step) | step ratio (peer / tune-matrix) | "
          "decode tokens/s (mean) | time to first token | prefill tokens/s | peak memory | start-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c in result["cases"].items():
        ours = c["summary"].get("tune-matrix")
        for impl in [i for i in impls if i in c["summary"]]:
            s = c["summary"][impl]
            ratio = (f"{s['decode_step_median_s'] / ours['decode_step_median_s']:.2f}x"
                     if ours and impl != "tune-matrix" else "")
            print(f"| {name} ({c['prompt_tokens']} + {c['max_new_tokens']} tokens) | {impl} | "
                  f"{s['decode_tokens_per_s']:.2f} (step {seconds(s['decode_step_median_s'])} ± "
                  f"{seconds(s['decode_step_mad_s'])}) | {ratio} | {s['decode_tokens_per_s_mean']:.2f} | "
                  f"{seconds(s['time_to_first_token_s'])} | {s['prefill_tokens_per_s']:.1f} | "
                  f"{s['max_rss_bytes'] / 2**30:.2f} GiB | {s['startup_s']:.1f} s |")


if __name__ == "__main__":
    main()
