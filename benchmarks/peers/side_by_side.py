#!/usr/bin/env python3
"""One training step of tune-matrix next to torchtune 0.6.1 and transformers + peft, on the same torch build.

    python3 benchmarks/peers/side_by_side.py                          # every case, 1 round, 1 thread
    python3 benchmarks/peers/side_by_side.py --cases tiny_lora --rounds 3 --threads 2

What runs: for each case (below) and round, the three implementations one after the other, each in its own
process (the order rotates from round to round), never two at a time:
  * tune-matrix: `build/bin/tune run <recipe> --config <built-in config>` with the case's overrides and
    tune_matrix.datasets.random_tokens_dataset, so every batch is [batch, seq] random ids, every position
    trained; its step times come from the run's summary.json.
  * torchtune and transformers + peft: benchmarks/peers/peer_step.py (the same model shape, LoRA settings,
    dtype, batch, optimizer, clipping and thread count; see its docstring for the step).
Per implementation: the median post-warm-up step time (and its median absolute deviation), tokens/s, start-up
(process start to first step: the child's wall time minus its step times), and peak memory = the child's
maximum resident set (ru_maxrss from wait4, the same reading for all three). Achieved FLOP/s: the FLOPs of a
step over its median time, with FLOPs = 6 x parameters x tokens for full fine-tuning (forward 2, backward 4) and
4 x parameters x tokens for LoRA (the frozen weights get no weight gradient), parameters counted with tied
embeddings once (the output projection is a matmul over them); attention scores are left out. The machine's
peak comes from build/bin/gemm_benchmark (best BM_Gemm rate of the dtype) at the same thread count.

The peers live in two virtual environments outside the checkout (torchtune 0.6.1 needs torchao 0.11, peft
0.21 refuses torchao < 0.16), each made once by this script from PyPI with pinned versions and pointed at
tune-matrix's own torch venv (a .pth file), so all three run the same torch build.

Writes a JSON file with every measurement (--out) and prints a Markdown table with the ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TORCH_VERSION = "2.11.0"
CACHE = Path(os.environ.get("TUNE_MATRIX_CACHE", Path.home() / ".cache" / "tune-matrix"))
TORCH_VENV = Path(os.environ.get("TUNE_MATRIX_VENV", CACHE / f"venv-torch-{TORCH_VERSION}"))
PEER_VENVS = {
    "torchtune": (CACHE / "venv-peer-torchtune", ["torchtune==0.6.1", "torchao==0.11.0"]),
    "peft": (CACHE / "venv-peer-hf", ["transformers==5.24.0", "peft==0.21.2", "accelerate==1.16.0"]),
}
IMPLS = ["tune-matrix", "torchtune", "peft"]

# Each case: the built-in config and recipe tune-matrix runs, its overrides, and the peers' equivalent.
# The optimizer is torch.optim.AdamW(fused=True, weight_decay=0.01) for all (the 1B full config's paged 8-bit
# AdamW needs bitsandbytes and CUDA, so it is replaced for everyone).
CASES = {
    "tiny_lora": dict(
        recipe="lora_finetune_single_device", config="tiny/lora_single_device", model="tiny", mode="lora",
        lora_rank=8, lora_alpha=16, clip="1.0", lr="3e-3", steps=80, warmup=10, overrides=[]),
    "tiny_full": dict(
        recipe="full_finetune_single_device", config="tiny/full_single_device", model="tiny", mode="full",
        lora_rank=8, lora_alpha=16, clip="1.0", lr="3e-3", steps=80, warmup=10, overrides=[]),
    "1b_lora": dict(
        recipe="lora_finetune_single_device", config="llama3_2/1B_lora_single_device", model="llama3_2_1b",
        mode="lora", lora_rank=64, lora_alpha=128, clip="none", lr="3e-4", steps=4, warmup=1, overrides=[]),
    "1b_full": dict(
        recipe="full_finetune_single_device", config="llama3_2/1B_full_single_device", model="llama3_2_1b",
        mode="full", lora_rank=8, lora_alpha=16, clip="none", lr="2e-5", steps=4, warmup=1,
        overrides=["optimizer._component_=torch.optim.AdamW", "optimizer.fused=True", "optimizer.weight_decay=0.01",
                   "optimizer_in_bwd=False"]),
    # 1b_full with each tensor stepped inside backward (its gradient freed at once): tune-matrix alone (the peer
    # script steps after backward), for the peak memory optimizer_in_bwd saves.
    "1b_full_in_bwd": dict(
        recipe="full_finetune_single_device", config="llama3_2/1B_full_single_device", model="llama3_2_1b",
        mode="full", lora_rank=8, lora_alpha=16, clip="none", lr="2e-5", steps=4, warmup=1, only="tune-matrix",
        overrides=["optimizer._component_=torch.optim.AdamW", "optimizer.fused=True", "optimizer.weight_decay=0.01",
                   "optimizer_in_bwd=True"]),
}


def log(*args):
    print("[side_by_side]", *args, file=sys.stderr, flush=True)


def site_packages(python):
    return subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()


def ensure_peer_venv(name):
    """The peer's venv, made once: its packages from PyPI, torch from tune-matrix's venv through a .pth."""
    venv, packages = PEER_VENVS[name]
    python = venv / "bin" / "python"
    stamp = venv / "tune-matrix-packages.txt"
    wanted = "\n".join(packages) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    torch_python = TORCH_VENV / "bin" / "python"
    if not torch_python.exists():
        sys.exit(f"no torch venv at {TORCH_VENV}; run scripts/setup.sh first (or set TUNE_MATRIX_VENV)")
    log(f"making {venv} with {' '.join(packages)} (once per machine)")
    subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    Path(site_packages(python), "tune_matrix_torch.pth").write_text(site_packages(torch_python) + "\n")
    subprocess.check_call([str(python), "-m", "pip", "install", "--quiet", *packages])
    stamp.write_text(wanted)
    return python


def run_child(argv, env):
    """Runs argv (no shell); returns (stdout, wall seconds, ru_maxrss in bytes)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read()
        proc.stderr.close()
        out.seek(0)
        text = out.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} exited with {code}:\n{err[-3000:]}\n{text[-2000:]}")
    return text, wall, usage.ru_maxrss * 1024  # Linux reports kilobytes


def gemm_peak(build, threads, env):
    """Best BM_Gemm rate per dtype, in FLOP/s, at `threads` threads."""
    text, _, _ = run_child([str(build / "bin" / "gemm_benchmark"), "--benchmark_filter=BM_Gemm",
                            "--benchmark_format=json"], env)
    peak = {}
    for b in json.loads(text)["benchmarks"]:
        dtype = "bf16" if "dtype:0" in b["name"] else "fp32"
        peak[dtype] = max(peak.get(dtype, 0.0), b["flops"])
    return peak


def run_tune_matrix(case, args, env, work):
    steps = case["steps"]
    out_dir = Path(work) / "tune-matrix"
    argv = [str(args.build / "bin" / "tune"), "run", case["recipe"], "--config", case["config"], "--allow-stand-ins", "--force",
            f"output_dir={out_dir}",
            "dataset={_component_: tune_matrix.datasets.random_tokens_dataset, "
            f"seq_len: {args.seq}, num_samples: {args.batch * steps}, seed: {args.seed}}}",
            f"batch_size={args.batch}", "shuffle=False", "epochs=1", f"max_steps_per_epoch={steps}",
            "gradient_accumulation_steps=1", f"dtype={args.dtype}", "save_checkpoints=False",
            f"seed={args.seed}", f"optimizer.lr={case['lr']}", "enable_activation_checkpointing=False",
            f"clip_grad_norm={'null' if case['clip'] == 'none' else case['clip']}", f"log_every_n_steps={steps}",
            "device=cpu", *case["overrides"]]
    _, wall, rss = run_child(argv, env)
    summary = json.loads((out_dir / "summary.json").read_text())
    return dict(step_times_s=summary["step_times_s"], losses=summary["losses"], wall_s=wall, max_rss_bytes=rss,
                total_params=summary["total_parameters"], trainable_params=summary["trainable_parameters"],
                version=summary.get("torch_version", ""))


def run_peer(name, python, case, args, env):
    argv = [str(python), str(ROOT / "benchmarks" / "peers" / "peer_step.py"), "--impl", name,
            "--model", case["model"], "--mode", case["mode"], "--dtype", args.dtype, "--batch", str(args.batch),
            "--seq", str(args.seq), "--steps", str(case["steps"]), "--warmup", str(case["warmup"]),
            "--threads", str(args.threads), "--seed", str(args.seed), "--lora-rank", str(case["lora_rank"]),
            "--lora-alpha", str(case["lora_alpha"]), "--clip-grad-norm", case["clip"], "--lr", case["lr"]]
    text, wall, rss = run_child(argv, env)
    r = json.loads(text.strip().splitlines()[-1])
    return dict(step_times_s=r["step_times_s"], losses=r["losses"], wall_s=wall, max_rss_bytes=rss,
                total_params=r["total_params"], trainable_params=r["trainable_params"], version=r["peer_version"])


def summarise(runs, case, tokens, peak):
    """Median post-warm-up step over every round's steps, and the rest of a table row."""
    steps = [t for r in runs for t in r["step_times_s"][case["warmup"]:]]
    median = statistics.median(steps)
    mad = statistics.median(abs(t - median) for t in steps)
    params = runs[0]["total_params"]
    flops = (4 if case["mode"] == "lora" else 6) * params * tokens
    startup = statistics.median(r["wall_s"] - sum(r["step_times_s"]) for r in runs)
    return dict(step_median_s=median, step_mad_s=mad, steps_timed=len(steps), tokens_per_s=tokens / median,
                flops_per_step=flops, achieved_flops=flops / median, of_peak=flops / median / peak,
                max_rss_bytes=max(r["max_rss_bytes"] for r in runs), startup_s=startup,
                total_params=params, trainable_params=runs[0]["trainable_params"], version=runs[0]["version"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="tiny_lora,1b_lora,1b_full",
                   help=f"comma-separated, of: {', '.join(CASES)} (default: %(default)s)")
    p.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of %(default)s")
    p.add_argument("--rounds", type=int, default=1, help="runs of each implementation per case (default 1)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of every child (default 1)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--build", type=Path, default=ROOT / "build", help="CMake build folder (default: build)")
    p.add_argument("--no-peak", action="store_true",
                   help="skip the matmul peak (minutes on a busy machine): FLOP shares are left out (nan)")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "side_by_side.json")
    p.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                   help="run nothing: print the table of results files written by --out (several: one table)")
    args = p.parse_args()
    if args.report:
        for path in args.report:
            result = json.loads(path.read_text())
            print_table(result, [i for i in IMPLS if any(i in c["summary"] for c in result["cases"].values())])
            print()
        return
    cases = args.cases.split(",")
    impls = args.impls.split(",")
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c}; use one of {', '.join(CASES)}")
    for i in impls:
        if i not in IMPLS:
            sys.exit(f"unknown implementation {i}; use one of {', '.join(IMPLS)}")
    pythons = {name: ensure_peer_venv(name) for name in impls if name != "tune-matrix"}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    peak = ({"bf16": float("nan"), "fp32": float("nan")} if args.no_peak
            else gemm_peak(args.build, args.threads, env))
    log(f"matmul peak at {args.threads} thread(s): bf16 {peak['bf16'] / 1e9:.0f} GFLOP/s, "
        f"fp32 {peak['fp32'] / 1e9:.0f} GFLOP/s")
    tokens = args.batch * args.seq
    result = dict(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), threads=args.threads, batch=args.batch,
                  seq=args.seq, dtype=args.dtype, rounds=args.rounds, gemm_peak_flops=peak, cases={})
    for name in cases:
        case = CASES[name]
        case_impls = [i for i in impls if i == case.get("only", i)]
        runs = {i: [] for i in case_impls}
        for rnd in range(args.rounds):
            order = case_impls[rnd % len(case_impls):] + case_impls[:rnd % len(case_impls)]
            for impl in order:
                log(f"{name} round {rnd + 1}/{args.rounds}: {impl}")
                with tempfile.TemporaryDirectory() as work:
                    r = (run_tune_matrix(case, args, env, work) if impl == "tune-matrix"
                         else run_peer(impl, pythons[impl], case, args, env))
                runs[impl].append(r)
                log(f"  median step {statistics.median(r['step_times_s'][case['warmup']:]):.4f} s, "
                    f"peak {r['max_rss_bytes'] / 2**30:.2f} GiB, wall {r['wall_s']:.1f} s")
        result["cases"][name] = dict(
            config=case["config"], mode=case["mode"], steps=case["steps"], warmup=case["warmup"], runs=runs,
            summary={i: summarise(runs[i], case, tokens, peak[args.dtype]) for i in case_impls})
        args.out.write_text(json.dumps(result, indent=1) + "\n")  # after every case: a long run keeps its part
    print_table(result, impls)
    log(f"wrote {args.out}")


def print_table(result, impls):
    print(f"{result['dtype']}, batch [{result['batch']}, {result['seq']}], {result['threads']} thread(s), "
          f"{result['rounds']} round(s), {result['date']}; matmul peak bf16 "
          f"{result['gemm_peak_flops']['bf16'] / 1e9:.0f} GFLOP/s, fp32 {result['gemm_peak_flops']['fp32'] / 1e9:.0f}")
    print()
    print("| case | implementation | step (median) | peer / tune-matrix | tokens/s | GFLOP/s | of peak | "
          "peak memory | start-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c in result["cases"].items():
        ours = c["summary"].get("tune-matrix")
        for impl in [i for i in impls if i in c["summary"]]:
            s = c["summary"][impl]
            ratio = f"{s['step_median_s'] / ours['step_median_s']:.2f}x" if ours and impl != "tune-matrix" else ""
            step = (f"{s['step_median_s']:.2f} s ± {s['step_mad_s']:.2f}" if s["step_median_s"] >= 1 else
                    f"{s['step_median_s'] * 1000:.1f} ms ± {s['step_mad_s'] * 1000:.1f}")
            print(f"| {name} | {impl} | {step} | {ratio} | "
                  f"{s['tokens_per_s']:.0f} | {s['achieved_flops'] / 1e9:.1f} | {s['of_peak']:.2f} | "
                  f"{s['max_rss_bytes'] / 2**30:.2f} GiB | {s['startup_s']:.1f} s |")


if __name__ == "__main__":
    main()
