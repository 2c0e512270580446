#!/usr/bin/env bash
# The GPU comparison in one command: every image encoding trained side by side on one GPU
# (experiment=compare_cifar_gpu), then the report of whatever finished.
#   bash scripts/gpu_sweep.sh                  # one seed, all encodings, ~10 minutes on an H100/H200-class GPU (estimate)
#   bash scripts/gpu_sweep.sh seed=1           # any override goes to train.py (trainer.max_epochs=200, ...)
# Writes runs/compare_cifar_gpu/ (or under run.root=...): the runs, and the report in report/. Rerunning it
# skips finished runs and resumes interrupted ones. Exit status: train.py's (1 when a job failed).
# Without a CUDA GPU it refuses (exit 2) and names the CPU comparison, unless trainer.accelerator=cpu is given:
# then it runs on the CPU as asked (tests/test_gpu_sweep.py does, at a tiny size).
set -uo pipefail
cd "$(dirname "$0")/.."
root=runs
on_cpu=false
for arg in "$@"; do
  case "$arg" in
    run.root=*) root="${arg#run.root=}" ;;
    trainer.accelerator=cpu | +trainer.accelerator=cpu | ++trainer.accelerator=cpu) on_cpu=true ;;
  esac
done
if [ "$on_cpu" = false ] && ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "error: trainer.accelerator: no CUDA GPU on this machine; scripts/gpu_sweep.sh trains 10 jobs side by side" \
    "on one GPU (on a CPU, the CPU comparison: python train.py -m experiment=compare_cifar_full; or" \
    "trainer.accelerator=cpu to run this sweep on the CPU anyway)" >&2
  exit 2
fi
start=$(date +%s)
python train.py -m experiment=compare_cifar_gpu "$@"
status=$?
python -m vitpos.compare runs="$root/compare_cifar_gpu" out="$root/compare_cifar_gpu/report" || status=$?
echo "gpu sweep: $(( $(date +%s) - start )) s in all (training, evaluation and report); exit $status"
exit $status
