#!/usr/bin/env bash
# The GPU comparison in one command: every image encoding trained side by side on one GPU
# (experiment=compare_cifar_gpu), then the report of whatever finished.
#   bash scripts/gpu_sweep.sh                  # one seed, all encodings, ~10 minutes on an H100/H200-class GPU (estimate)
#   bash scripts/gpu_sweep.sh seed=1           # any override goes to train.py (trainer.max_epochs=200, ...)
# Writes runs/compare_cifar_gpu/ (or under run.root=...): the runs, and the report in report/. Rerunning it
# skips finished runs and resumes interrupted ones. Exit status: train.py's (1 when a job failed).
set -uo pipefail
cd "$(dirname "$0")/.."
root=runs
for arg in "$@"; do
  case "$arg" in run.root=*) root="${arg#run.root=}" ;; esac
done
start=$(date +%s)
python train.py -m experiment=compare_cifar_gpu "$@"
status=$?
python -m vitpos.compare runs="$root/compare_cifar_gpu" out="$root/compare_cifar_gpu/report" || status=$?
echo "gpu sweep: $(( $(date +%s) - start )) s in all (training, evaluation and report); exit $status"
exit $status
