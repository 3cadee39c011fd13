#!/usr/bin/env python3
"""2 ranks against 1 process at the same global batch: throughput ratio and peak memory per rank.

Runs `tune run` alternately (never two at once) for one config pair:
  - one process:  <single recipe> --config <single config>  batch_size=2B, OMP_NUM_THREADS=<threads>
  - two ranks:    tune run --nproc_per_node 2 <distributed recipe> --config <distributed config>
                  batch_size=B, each rank OMP_NUM_THREADS=<threads>/2 (the same cores in all)
and reads each run's summary.json (median tokens/s after the warm-up step; peak memory: the process's, and
the largest rank's). Prints each round and the median ratio.

    python3 benchmarks/distributed_ratio.py                       # tiny Llama 3.2 full, fp32
    python3 benchmarks/distributed_ratio.py --kind lora --single llama3_2/1B_lora_single_device \\
        --distributed llama3_2/1B_lora --batch 1 --steps 3 --rounds 2 --dtype bf16
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(argv, env, out_dir):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}\n{r.stdout[-3000:]}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tune", default=os.path.join(HERE, "..", "build", "bin", "tune"))
    p.add_argument("--kind", choices=["full", "lora"], default="full")
    p.add_argument("--single", help="single-device config (default tiny/<kind>_single_device)")
    p.add_argument("--distributed", help="distributed config (default tiny/<kind>_distributed)")
    p.add_argument("--batch", type=int, default=4, help="samples per rank (the one process takes 2x)")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per run (the first is warm-up)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="cores in all: the one process's threads")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--layout", default="fsdp_reshard_after_forward=True",
                   help="override choosing the layout, e.g. data_parallel_shard_dim=1 (replicated)")
    a = p.parse_args()
    single = a.single or f"tiny/{a.kind}_single_device"
    dist = a.distributed or f"tiny/{a.kind}_distributed"
    common = ["device=cpu", f"dtype={a.dtype}", "epochs=1", f"max_steps_per_epoch={a.steps}",
              "gradient_accumulation_steps=1", "save_checkpoints=False", "log_every_n_steps=1"]
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            env1 = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
            one = run([a.tune, "run", f"{a.kind}_finetune_single_device", "--config", single, "--allow-stand-ins",
                       f"batch_size={2 * a.batch}", f"output_dir={tmp}/one"] + common, env1, f"{tmp}/one")
            env2 = dict(os.environ, OMP_NUM_THREADS=str(max(1, a.threads // 2)))
            two = run([a.tune, "run", "--nproc_per_node", "2", f"{a.kind}_finetune_distributed", "--config", dist,
                       "--allow-stand-ins", f"batch_size={a.batch}", a.layout, f"output_dir={tmp}/two"] + common,
                      env2, f"{tmp}/two")
            ratio = two["tokens_per_second"] / one["tokens_per_second"]
            ratios.append(ratio)
            print(f"round {r + 1}: 1 process {one['tokens_per_second']:.1f} tok/s, peak "
                  f"{one['peak_memory_bytes'] / 2**30:.3f} GiB | 2 ranks {two['tokens_per_second']:.1f} tok/s, "
                  f"peak of the largest rank {two['peak_memory_bytes'] / 2**30:.3f} GiB | ratio {ratio:.3f}",
                  flush=True)
    print(f"median 2-rank / 1-process throughput ratio over {a.rounds} rounds: {statistics.median(ratios):.3f} "
          f"({single} vs {dist}, {a.layout}, batch {a.batch} per rank, {a.threads} cores, {a.dtype})")


if __name__ == "__main__":
    main()
