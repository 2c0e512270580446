"""``train(cfg)``: one training run from a composed config (what ``train.py`` calls). The path (drawn in
docs/architecture.md): check the config, claim the run folder, build task and data, fit, test the best
checkpoint, evaluate beyond the training size, log to TensorBoard and write ``metrics.json``.
"""

from __future__ import annotations

import logging
import math
import time

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, Timer
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from vitpos.callbacks import (
    AtomicCheckpointIO,
    BestCheckpoint,
    DivergenceGuard,
    EpochLine,
    EpochSeed,
    LastCheckpoint,
    PicturesCallback,
    divergence_hint,
)
from vitpos.cli.console import device_line, progress_bar, quiet_console, shows_bar, summary_line
from vitpos.encodings.plugins import load_named
from vitpos.extrapolate import evaluate_module
from vitpos.metrics import metric_name, parse_metric
from vitpos.run.identity import next_commands
from vitpos.run.plan import RunPlan, plan_run
from vitpos.run.status import format_metrics, relative_to_run, save_predictions, write_status
from vitpos.runtime import launcher_workers, resolve_runtime, sweep_jobs, trainer_precision
from vitpos.tables import final_scores_markdown, sweep_markdown
from vitpos.tasks import build
from vitpos.validate import validate

log = logging.getLogger("vitpos")


def train(cfg: DictConfig, checked: bool = False) -> dict[str, float]:
    """Train, test and evaluate one configuration; returns every final metric. Bad input raises
    :class:`vitpos.errors.InputError` before anything is written. ``checked``: the caller already ran
    :func:`vitpos.validate.validate` on ``cfg``."""
    if not checked:
        validate(cfg)  # the one check of the config, before any folder, logger or data
    quiet_console(side_by_side=launcher_workers() > 1)  # a joblib sweep: jobs share a terminal (submitit's: a log each)
    resolve_runtime(cfg)  # threads per sweep job
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    load_named(cfg.encoding)  # a plug-in named on the command line (each sweep job's process imports it)
    with plan_run(cfg) as plan:  # identity, folder (claimed) and what it holds, once
        if plan.finished is not None:
            print(format_metrics(plan.finished, plan.folder))
            print("(finished earlier: stored metrics from metrics.json; nothing trained)")
            if note := unmeasured_note(plan, cfg.eval):
                print(note)
            return plan.finished
        return fit(cfg, plan)


def fit(cfg: DictConfig, plan: RunPlan) -> dict[str, float]:
    """:func:`train` inside its claimed run folder, from the start or from ``plan.resume``."""
    out, fast = plan.folder, bool(cfg.trainer.fast_dev_run)
    timer = Timer()  # fit wall time, kept in last.ckpt: a resumed run adds to what the checkpoint says
    guard = DivergenceGuard(divergence_hint(cfg), int(cfg.trainer.log_every_n_steps or 20), out)  # and its status
    callbacks = [LearningRateMonitor(logging_interval="step"), timer, EpochSeed(cfg.seed), guard]  # seed: exact resume
    checkpoint = None
    if not fast:  # best by val/acc; save_last=False: LastCheckpoint writes last.ckpt every epoch, not on improvement
        checkpoint = BestCheckpoint(  # best-epoch<NNN>.ckpt, NNN counted from 1
            dirpath=str(out / "checkpoints"),
            filename="best-epoch{epoch:03d}",
            monitor="val/acc",
            mode="max",
            save_last=False,
            auto_insert_metric_name=False,
        )
        callbacks += [checkpoint, LastCheckpoint(out / "checkpoints" / "last.ckpt")]  # says where Ctrl-C left it
    if cfg.task.pictures:
        callbacks.append(PicturesCallback(cfg.task.pictures_every_n_epochs))
    module, datamodule = build(cfg)
    plan.check_fits(module)  # a size mismatch as one line, before a logger writes a file
    trainer_opts = OmegaConf.to_container(cfg.trainer, resolve=True)
    trainer_opts["precision"] = trainer_precision(trainer_opts)  # auto: bf16-mixed where native (vitpos/runtime.py)
    if no_gpu := device_line(trainer_opts["precision"]):  # without a GPU: one line for Lightning's GPU/TPU lines
        log.info(no_gpu)
    if not trainer_opts.setdefault("enable_model_summary", False):
        log.info(summary_line(module))  # one line instead of Lightning's table
    trainer_opts["enable_progress_bar"] = shows_bar(trainer_opts["enable_progress_bar"])
    bar = progress_bar(plan.name) if trainer_opts["enable_progress_bar"] else EpochLine(plan.name)  # or a line each
    callbacks.append(bar)  # last: callbacks run in list order, so the epoch's line follows the others' work
    trainer_opts["use_distributed_sampler"] = False  # the datamodules shard DDP evaluation unpadded: exact metrics
    trainer_opts.setdefault("plugins", []).append(AtomicCheckpointIO())  # checkpoints written beside, renamed in
    logger_opts = OmegaConf.to_container(cfg.logger, resolve=True)
    logger = RunLogger(save_dir=str(out.parent.parent), name=out.parent.name, version=out.name, **logger_opts)
    trainer = L.Trainer(logger=logger, callbacks=callbacks, **trainer_opts)
    trainer.fit(module, datamodule=datamodule, ckpt_path=plan.resume, weights_only=True)
    fit_seconds = timer.time_elapsed("train")  # now: loading the best checkpoint for testing reloads the timer too
    return test_and_report(cfg, plan, trainer, module, datamodule, checkpoint, fit_seconds)


class RunLogger(TensorBoardLogger):
    """Lightning's TensorBoard logger with only curves on SCALARS, so the page opens on ``train/`` and ``val/``:
    ``epoch`` and the single-point ``test/*`` and ``time/*`` numbers go to the TEXT table ``test/final``."""

    _naming_columns = False

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        if self._naming_columns:
            return
        curves = {k: v for k, v in metrics.items() if k != "epoch" and not k.startswith(("test/", "time/"))}
        super().log_metrics(curves, step)

    def finalize(self, status: str) -> None:
        """As Lightning's, but on a failed run a refused write here does not hide the error that stopped it."""
        try:
            super().finalize(status)
        except OSError:
            if status == "success":
                raise

    def log_hyperparams(self, params, metrics: dict | None = None) -> None:
        """As Lightning's, but ``metrics`` only name the HPARAMS columns (no false step-0 point on the curves)."""
        self._naming_columns = True
        try:
            super().log_hyperparams(params, metrics)
        finally:
            self._naming_columns = False


def test_and_report(cfg, plan: RunPlan, trainer, module, datamodule, checkpoint, fit_seconds: float) -> dict:
    """Test the best checkpoint, evaluate at other sizes, log and write ``metrics.json`` (rank 0)."""
    out, fast = plan.folder, bool(cfg.trainer.fast_dev_run)
    eval_start = time.perf_counter()
    best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
    results = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False, weights_only=True)
    metrics = {k: float(v) for k, v in (results[0] if results else {}).items()}
    if checkpoint is not None and checkpoint.best_model_score is not None:
        metrics["val/acc_best"] = float(checkpoint.best_model_score)
    if not trainer.is_global_zero:
        return metrics  # extrapolation, logging and metrics.json happen once, on rank 0
    predictions = list(getattr(module, "test_predictions", None) or [])  # of the scored checkpoint
    extra = evaluate_module(  # fast_dev_run: one test batch per size, as Lightning's own loops
        module,
        datamodule,
        cfg.eval,
        plan.kind,
        device=module.device,
        max_batches=1 if fast else None,
        progress=sweep_jobs() == 1,  # side by side, bars of several jobs would overwrite each other
        precision=trainer.precision,  # as trainer.test scored test/acc (bf16 autocast where the run used it)
    )
    metrics.update(extra)
    metrics["time/fit_min"] = fit_seconds / 60  # training + validation (+ compilation), over every resume
    metrics["time/eval_min"] = (time.perf_counter() - eval_start) / 60  # test + evaluation at other sizes
    logger = trainer.logger
    logger.experiment.add_text("test/final", final_scores_markdown(metrics), trainer.global_step)
    if extra:  # one text table, not one single-point chart per size and strategy (metrics.json keeps each)
        default = f"default ({module.encoding.strategy})"
        table = sweep_markdown({k: v for k, v in extra.items() if not math.isnan(v)}, default)
        logger.experiment.add_text("test/beyond_training_size", table, trainer.global_step)
    metrics["params"] = float(sum(p.numel() for p in module.model.parameters()))
    metrics["params_pos"] = float(sum(p.numel() for p in module.model.pos.parameters()))
    model = OmegaConf.to_container(cfg.model, resolve=True)
    hparams = {"encoding": plan.label, "model": model, "data": str(cfg.data.name), "seed": int(cfg.seed)}
    hparams.update(params=int(metrics["params"]), params_pos=int(metrics["params_pos"]))
    # the HPARAMS metric columns, named here; values: the curves at their last value (compared on validation, not test)
    logger.log_hyperparams(hparams, dict.fromkeys(("val/acc", "val/loss", "train/loss"), 0.0))
    logger.finalize("success")
    if launcher_workers() == 1:  # joblib's side by side: the sweep's end line per job says it (vitpos/run/sweep.py)
        print(format_metrics(metrics, out))
        subset = (cfg.get("eval") or {}).get("test_subset")
        print(next_commands(out, str(cfg.task.name), best, cfg.encoding.get("module"), subset))
    if not fast:
        if trainer.world_size == 1:  # one process saw every test image (DDP ranks: a shard each)
            save_predictions(out, predictions)
        done = {"max_epochs": cfg.trainer.get("max_epochs"), "epochs": trainer.current_epoch}
        done["best_checkpoint"] = relative_to_run(out, best)
        write_status(out, "complete", metrics, **done)  # the last write: the run is complete once this is there
    return metrics


def unmeasured_note(plan: RunPlan, eval_cfg) -> str | None:
    """One line naming the sizes ``eval.resolutions`` / ``eval.lengths`` ask for that the finished run never
    measured, with the command that measures them (not evaluated here: ``metrics.json`` stays the record of
    what the training run measured, as eval options are no part of a run's identity)."""
    option = "lengths" if plan.kind == "len" else "resolutions"
    scores = filter(None, map(parse_metric, plan.finished))  # at the default strategy, native or upsampled
    measured = {m.size for m in scores if (m.stat, m.kind, m.strategy) == ("acc", plan.kind, None)}
    named = [(s, metric_name(plan.kind, s)) for s in eval_cfg.get(option) or []]  # each size converted once
    missing = [(s, name) for s, name in named if parse_metric(name).size not in measured]
    if not missing:
        return None
    listed = ",".join(str(s) if isinstance(s, (int, str)) else str(list(s)) for s, _ in missing).replace(" ", "")
    return (
        f"note: eval.{option} asks for {', '.join(name for _, name in missing)}, which this "
        f"finished run never measured (a finished run is not evaluated again); measure it with: "
        f"python -m vitpos.extrapolate ckpt={plan.best} {option}=[{listed}] out={plan.folder}/extrapolation"
    )
