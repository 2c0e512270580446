#!/usr/bin/env bash
# scripts/gpu_sweep.sh on a bare GPU machine for a short time: a
# machine with torch, lightning and timm but no hydra, no network and no ../shared. What it needs travels
# in two git-ignored folders (.whl: the hydra wheels; .gpudata: the CIFAR-10 archive), and everything
# worth keeping goes to $OUT: the log, the GPU load samples, and one archive with the finished runs
# (scripts/snapshot_runs.py: metrics, hparams, TensorBoard events; no checkpoints) and the report.
#   here:  pip download hydra-core==1.3.2 omegaconf==2.3.0 hydra-joblib-launcher==1.2.0 (+ an antlr4 4.9.3
#          wheel from `pip wheel`) into .whl/; cp ../shared/datasets/cifar10-jpeg.tar.gz .gpudata/
#   there: bash scripts/device_gpu_sweep.sh DEADLINE_S [train.py overrides...]
# DEADLINE_S bounds the training (the report and the archive still get written): the machine's time is
# short, and a sweep killed at its limit would bring back nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=${1:?give the seconds the sweep may train, then the overrides}
shift
t0=$(date +%s)
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
log="$out/sweep.log"
exec > >(tee "$log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
export TORCHINDUCTOR_COMPILE_THREADS=1  # one process per encoding compiles at once: no pool of 16 workers in each
# gpu_sweep.sh calls `python`; a wrapper, not a link: a linked venv python would not find its venv. rm first:
# writing through a link left by an earlier try would overwrite the interpreter itself (it happened once).
rm -f /tmp/bin/python
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/bin/python && chmod +x /tmp/bin/python && export PATH="/tmp/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 300 python -c "import torch, lightning, timm, hydra; print('torch', torch.__version__, 'lightning', lightning.__version__, 'timm', timm.__version__, 'hydra', hydra.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || exit 1
mkdir -p data && tar xzf .gpudata/cifar10-jpeg.tar.gz -C data || exit 1
# decode the JPEGs once, both splits at once, before the jobs start (each job would otherwise decode them itself)
pids=()
for split in train test; do
  python -c "from vitpos.data.cifar10 import load_imagefolder as f; f('data/cifar10', '$split', progress=False)" &
  pids+=($!)
done
wait "${pids[@]}" || exit 1   # a bare `wait` would also wait for the tee above, forever
echo "setup: $(( $(date +%s) - t0 )) s (wheels, data, decoding)"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 5 > "$out/gpu_load.csv" &
sampler=$!
timeout --signal=INT --kill-after=30 "$deadline" bash scripts/gpu_sweep.sh "$@"
status=$?
kill $sampler
# gpu_sweep.sh writes the report after the sweep; after a timeout, write it from whatever finished
[[ -f runs/compare_cifar_gpu/report/report.md ]] || python -m vitpos.compare runs=runs/compare_cifar_gpu out=runs/compare_cifar_gpu/report
mkdir -p /tmp/pack && python scripts/snapshot_runs.py runs/compare_cifar_gpu /tmp/pack/runs
cp -r runs/compare_cifar_gpu/report /tmp/pack/report 2>/dev/null
tar czf "$out/gpu_sweep.tar.gz" -C /tmp/pack .
echo "device script: $(( $(date +%s) - t0 )) s in all; sweep exit $status"
