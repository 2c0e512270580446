"""Evaluation beyond the training size: image resolutions and sequence lengths.

``evaluate.py`` holds the one evaluation loop (every strategy x size, metric
names ``test/acc@res{R}`` / ``test/acc@len{L}``), used at the end of training;
``checkpoints.py`` evaluates saved checkpoints (``python -m vitpos.extrapolate``).
"""

from vitpos.metrics import UPSAMPLED, metric_name

from .evaluate import (
    choose_strategies,
    evaluate_module,
    evaluate_sizes,
    resampling_of,
    strategies_of,
    use_test_subset,
)

__all__ = [
    "UPSAMPLED",
    "choose_strategies",
    "evaluate_module",
    "evaluate_sizes",
    "metric_name",
    "resampling_of",
    "strategies_of",
    "use_test_subset",
]
