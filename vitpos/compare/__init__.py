"""Turn a folder of runs into tables and a few plots.

usage: python -m vitpos.compare runs=DIR [out=DIR] [multirun=[DIR,...]]   (--help: the options)

A *run* is any folder below ``runs=`` that holds TensorBoard event files
(possibly inside ``version_*/``) or a ``metrics.json``, or is named
``seed<k>``, at any depth: ``runs/<group>/<model>/<label>-<hash>/seed<k>`` as
well as the older ``runs/<group>/<label>/seed<k>``. Its task (group), model and
label come from the folder names and from the config saved in its
``hparams.yaml``; its training budget (data size, epochs) from that config.
Curves are read with TensorBoard's own reader, the final numbers from
``metrics.json`` (runs made before the final numbers left TensorBoard's
SCALARS also have them as scalars). A run is *complete* when it has a
``test/acc``; *diverged* when its ``metrics.json`` says so or its
``train/loss`` went non-finite; incomplete or failed otherwise. Only complete
runs enter the means; every other run is listed with its reason, never dropped.

Hydra multirun job folders (``multirun/<date>/<time>/<n>/`` with
``.hydra/overrides.yaml``), found below ``runs=`` or given with
``multirun=``, are listed with their overrides; a job whose log holds an
error is listed as failed with its error line, even when it failed before its
run folder existed (its saved config is then checked again to name the error).
``runs=`` may be a multirun folder itself: the run folders its jobs trained
in (computed from each job's config) are reported.

Writes into ``out=`` (default ``<runs>/report``): ``report.md`` (accuracies
in %, "mean ± std (n seeds)", one section per task, model and budget;
extrapolation as one table per strategy),
``report.csv`` (one row per task/model/budget/label, fractions,
``<metric>_mean``/``<metric>_std`` columns), ``runs.csv`` (one row per run,
with its status) and ``val_acc_curves.png``, ``acc_vs_resolution.png``,
``acc_vs_length.png``.
"""

from .summary import Comparison, compare, main

__all__ = ["Comparison", "compare", "main"]
