#!/usr/bin/env bash
# The GPU checks (bf16, compile, DDP, the sweep) as one prepared command for a bare GPU machine:
# the bf16 + compile training-step table against timm, then the GPU sweep (every image encoding side by side
# on the one GPU) and its report, logs and report copied to $OUT.
#
#   here, once:      bash scripts/device_check.sh prepare     # .device/: pure-Python packages the device image
#                                                            # lacks (hydra-core, omegaconf, antlr4, the joblib
#                                                            # launcher) and the CIFAR-10 archive (~21 MB)
#   on the device:   run(command="bash scripts/device_check.sh run", carry=[".device"], timeout_s=600)
#
# The device image has torch, lightning, timm, torchmetrics and tensorboard (device/KINDS.md); nothing can be
# fetched there. Budget: 15 device minutes per session, a machine's start included, so the sweep gets
# SWEEP_S seconds (default 420) and EPOCHS epochs (default: the experiment's 100); a sweep stopped by the
# time limit leaves its finished runs in the report. Override: EPOCHS=60 SWEEP_S=360 bash scripts/device_check.sh run
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  prepare)
    rm -rf .device && mkdir -p .device/site
    site=$(python -c "import omegaconf, os; print(os.path.dirname(os.path.dirname(omegaconf.__file__)))")
    for pkg in hydra omegaconf antlr4 hydra_plugins; do cp -r "$site/$pkg" .device/site/; done
    cp ../shared/datasets/cifar10-jpeg.tar.gz .device/
    grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
    du -sh .device
    ;;
  run)
    out=${OUT:-runs/device_check}
    mkdir -p "$out"
    export PYTHONPATH="$PWD/.device/site:$PWD" PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/device.txt"
    mkdir -p data && tar xzf .device/cifar10-jpeg.tar.gz -C data
    timeout 150 python3 -m bench.run gpu gpu_minutes=0 2>&1 | tee "$out/bench_gpu.log"
    epochs=()
    [[ -n "${EPOCHS:-}" ]] && epochs=("trainer.max_epochs=$EPOCHS")
    timeout "${SWEEP_S:-420}" python3 train.py -m experiment=compare_cifar_gpu "${epochs[@]}" 2>&1 | tee "$out/sweep.log"
    python3 -m vitpos.compare runs=runs/compare_cifar_gpu 2>&1 | tail -40
    # $OUT brings back at most 8 files: the three logs above and the report's tables
    cp runs/compare_cifar_gpu/report/{report.md,report.csv,runs.csv} "$out/" 2>/dev/null || true
    ;;
  *)
    echo "usage: bash scripts/device_check.sh prepare|run" >&2
    exit 2
    ;;
esac
