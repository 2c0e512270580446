#!/usr/bin/env bash
# GPU check in one command (about 8 minutes): the bf16 + compile training-step table vs timm compiled,
# then minutes to 80% / 90% CIFAR-10 accuracy of the default recipe. Exits 2 without CUDA.
#   bash bench/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m bench.run gpu "$@"
