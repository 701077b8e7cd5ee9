#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU (the figures in
# docs/benchmarks.md, "On a GPU"): the NVML exporter's tests on the real library, decode at
# batch 1 against the memory-bandwidth bound (the server's small model and two real models'
# shapes), and the reference server on CUDA under load with its GPU series beside nvidia-smi.
#
#   OUT=bench/out/gpu bash bench/gpu_check.sh
#
# Needs python3 with torch (CUDA), the monitor's dependencies and pytest; writes at most 7
# files to $OUT.
set -uo pipefail
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
status=0
step() { echo; echo "=== $* ($(date -u +%T))"; "$@" || { echo "FAILED ($?): $*"; status=1; }; }

exec > >(tee "$OUT/log.txt") 2>&1
step nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
  --format=csv
step "$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
step "$PY" -m pytest -q -p no:cacheprovider tests/exporters/test_gpu.py
step "$PY" -m bench.decode_bandwidth --model small --json "$OUT/decode_small.json"
step "$PY" -m bench.decode_bandwidth --model llama-1b-shape --num-tokens 128 \
  --json "$OUT/decode_1b.json"
step "$PY" -m bench.decode_bandwidth --model llama-8b-shape --num-tokens 128 \
  --json "$OUT/decode_8b.json"
step "$PY" -m bench.gpu_serving --model small --rate 16 --duration 30 --out /tmp/gpu_serving
cp /tmp/gpu_serving/gpu_serving.json /tmp/gpu_serving/server.log "$OUT"/ 2>/dev/null
echo "=== done ($(date -u +%T)), status $status"
exit "$status"
