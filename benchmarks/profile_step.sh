#!/bin/bash
# One 1B training step profiled by operation (benchmarks/README.md, "Profile by operation"): tune run on
# llama3_2/1B_lora_single_device or llama3_2/1B_full_single_device with the side-by-side benchmark's settings
# (seed's weights, random [4, 256] batches, bf16, no clipping or checkpointing; full with fused AdamW in place
# of the config's CUDA-only paged 8-bit optimizer), 4 steps, steps 3 and 4 recorded.
#
#   benchmarks/profile_step.sh lora|full <output dir> [more overrides]
#   THREADS=1 benchmarks/profile_step.sh full /tmp/p     # threads: $THREADS, else 2
#   TUNE_MATRIX_ATEN_KERNELS=1 benchmarks/profile_step.sh lora /tmp/p   # the ATen forms of the one-pass kernels
#
# Writes <output dir>/prof/op_profile.txt and .json; prints the run (the profile's line included).
set -euo pipefail
if [ $# -lt 2 ] || { [ "$1" != lora ] && [ "$1" != full ]; }; then
  echo "usage: $0 lora|full <output dir> [overrides...]" >&2
  exit 2
fi
case_name=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
tune=${TUNE:-$here/build/bin/tune}
if [ "$case_name" = lora ]; then
  recipe=lora_finetune_single_device config=llama3_2/1B_lora_single_device lr=3e-4 extra=()
else
  recipe=full_finetune_single_device config=llama3_2/1B_full_single_device lr=2e-5
  extra=(optimizer._component_=torch.optim.AdamW optimizer.fused=True optimizer.weight_decay=0.01 optimizer_in_bwd=False)
fi
OMP_NUM_THREADS=${THREADS:-2} exec "$tune" run "$recipe" --config "$config" --allow-stand-ins --force \
  "output_dir=$out" "dataset={_component_: tune_matrix.datasets.random_tokens_dataset, seq_len: 256, num_samples: 16, seed: 0}" \
  batch_size=4 shuffle=False epochs=1 max_steps_per_epoch=4 gradient_accumulation_steps=1 dtype=bf16 \
  save_checkpoints=False seed=0 "optimizer.lr=$lr" enable_activation_checkpointing=False clip_grad_norm=null \
  log_every_n_steps=1 device=cpu profiler.enabled=True profiler.wait_steps=0 profiler.warmup_steps=2 \
  profiler.active_steps=2 "profiler.output_dir=$out/prof" "${extra[@]}" "$@"
