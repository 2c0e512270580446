"""``train(cfg)``: one training run from a composed config (what ``train.py`` calls).

Builds the task and data, fits with Lightning's Trainer (checkpoints: best by
``val/acc`` and last), tests the best checkpoint, evaluates beyond the training
size (``eval``), logs pictures and final metrics to TensorBoard, and returns
the metrics.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint, Timer
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from vitpos.console import progress_bar, quiet_console, summary_line
from vitpos.runs import next_commands, run_dir, run_label
from vitpos.validate import validate

log = logging.getLogger("vitpos")


def build(cfg: DictConfig):
    """(LightningModule, LightningDataModule) for ``cfg.task.name``."""
    name = cfg.task.name
    if name == "classification":
        from vitpos.data.images import ImageDataModule
        from vitpos.tasks.classification import ImageClassifier

        data_opts = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if k != "num_classes"}
        datamodule = ImageDataModule(**data_opts, shuffle_seed=int(cfg.seed))  # batch order from (seed, epoch)
        plain = OmegaConf.to_container(cfg, resolve=True)
        plain["data"]["num_classes"] = datamodule.num_classes
        return ImageClassifier(plain), datamodule
    if name == "sequence":
        from vitpos.tasks.sequence import build as build_sequence

        return build_sequence(cfg)
    raise ValueError(f"unknown task.name '{name}'; valid: classification, sequence (task=...)")


def config_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    keys = sorted(set(saved) | set(current))
    out = []
    for k in keys:
        a, b = saved.get(k), current.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} in the checkpoint, {b!r} now")
    return out


def check_same_run(cfg: DictConfig, last: Path) -> None:
    """Refuse to continue a checkpoint whose run-defining config
    (:func:`vitpos.runs.identity`: what the folder's hash covers) differs;
    settings that only change where or how a run is shown may differ."""
    from vitpos.runs import identity
    from vitpos.safe_load import load_checkpoint

    saved = load_checkpoint(last)["hyper_parameters"]["cfg"]  # weights_only=True: a crafted file is refused
    diffs = config_differences(identity(saved), identity(cfg))
    if diffs:
        raise ValueError(
            f"{last} belongs to a run with another configuration ({'; '.join(diffs[:3])}"
            f"{'; ...' if len(diffs) > 3 else ''}). Pass run.label=<name> or run.root=<dir> for a new run, "
            "or resume=true to continue that checkpoint anyway"
        )


def resume_path(cfg: DictConfig, ckpt_dir: Path) -> str | None:
    """The checkpoint to continue from, per ``resume`` (see configs/train.yaml)."""
    last = ckpt_dir / "last.ckpt"
    mode = cfg.get("resume", "auto")
    if mode in (None, False, "false", "never"):
        if ckpt_dir.exists() and any(ckpt_dir.iterdir()):
            raise FileExistsError(
                f"{ckpt_dir.parent} already holds a run; pass resume=auto to continue it, "
                "seed=<other> or run.label=<name> for a new run, or delete the folder"
            )
        return None
    if mode in (True, "true", "auto"):
        if last.exists():
            if mode == "auto":
                check_same_run(cfg, last)
            else:
                from vitpos.safe_load import load_checkpoint

                load_checkpoint(last)  # refuses a crafted or torn file with one line, before the Trainer
            log.info("resuming from %s", last)
            return str(last)
        if mode is True or mode == "true":
            raise FileNotFoundError(f"resume=true but {last} does not exist; use resume=auto to start fresh")
        return None
    if not Path(str(mode)).exists():
        raise FileNotFoundError(f"resume={mode}: no such checkpoint file")
    return str(mode)


def finished_run(cfg: DictConfig, out: Path) -> dict[str, float] | None:
    """The stored metrics when ``out`` holds this very run, finished and tested
    (``metrics.json`` says complete with the same ``trainer.max_epochs``):
    rerunning the command then reports them instead of training again. A run
    that diverged is refused (it would diverge again)."""
    from vitpos.callbacks import DivergenceError
    from vitpos.run_status import read_status

    status = read_status(out)
    if status is None or cfg.get("resume", "auto") not in (True, "true", "auto"):
        return None
    last = out / "checkpoints" / "last.ckpt"
    if last.exists() and cfg.get("resume", "auto") == "auto":
        check_same_run(cfg, last)
    if status["status"] == "diverged":
        raise DivergenceError(
            f"{out} holds a run that diverged ({status.get('reason', 'see metrics.json')}); "
            "pass run.label=<name> for a new run with other options, or delete the folder"
        )
    if status["status"] == "complete" and status.get("max_epochs") == cfg.trainer.get("max_epochs"):
        return status["metrics"]
    return None


def lifecycle_callbacks(cfg: DictConfig, ckpt_dir: Path, fast: bool) -> list:
    """Per-epoch seeding (exact resume), the divergence guard and, unless
    ``fast_dev_run``, best-by-``val/acc`` and every-epoch ``last.ckpt``."""
    from vitpos.callbacks import DivergenceGuard, EpochSeed, LastCheckpoint, divergence_hint

    every = int(cfg.trainer.get("log_every_n_steps", 20) or 20)
    callbacks = [EpochSeed(cfg.seed), DivergenceGuard(divergence_hint(cfg), every)]
    if not fast:
        best = ModelCheckpoint(
            dirpath=str(ckpt_dir),
            filename="best-epoch{epoch:03d}",
            monitor="val/acc",
            mode="max",
            save_last=False,  # LastCheckpoint writes last.ckpt every epoch, not only on improvement
            auto_insert_metric_name=False,
        )
        callbacks += [best, LastCheckpoint(ckpt_dir / "last.ckpt")]
    return callbacks


def train(cfg: DictConfig) -> dict[str, float]:
    """Train, test and evaluate one configuration; returns every final metric."""
    from vitpos.callbacks import DivergenceError, LastCheckpoint
    from vitpos.run_status import write_status

    validate(cfg)  # train.py checked already; here for callers of train(cfg), before anything is written
    from vitpos.runtime import resolve_runtime, trainer_precision

    resolve_runtime(cfg)  # threads per sweep job
    quiet_console()
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    out = run_dir(cfg)
    log.info("run folder: %s", out)
    ckpt_dir = out / "checkpoints"
    fast = bool(cfg.trainer.get("fast_dev_run", False))
    done = None if fast else finished_run(cfg, out)
    if done is not None:
        print(format_metrics(done, out) + "\n(finished earlier: stored metrics from metrics.json; nothing trained)")
        return done
    ckpt_path = None if fast else resume_path(cfg, ckpt_dir)  # before anything is written to the folder
    module, datamodule = build(cfg)
    logger = TensorBoardLogger(
        save_dir=str(out.parent.parent),
        name=out.parent.name,
        version=out.name,
        **OmegaConf.to_container(cfg.logger, resolve=True),
    )
    timer = Timer()  # fit wall time, kept in last.ckpt: a resumed run adds to what the checkpoint says
    callbacks = [LearningRateMonitor(logging_interval="step"), timer, *lifecycle_callbacks(cfg, ckpt_dir, fast)]
    checkpoint = next((c for c in callbacks if isinstance(c, ModelCheckpoint)), None)
    last = next((c for c in callbacks if isinstance(c, LastCheckpoint)), None)
    if cfg.task.get("pictures", True):
        from vitpos.callbacks import PicturesCallback

        callbacks.append(PicturesCallback(cfg.task.get("pictures_every_n_epochs", 0)))
    trainer_opts = OmegaConf.to_container(cfg.trainer, resolve=True)
    trainer_opts["precision"] = trainer_precision(trainer_opts)  # auto: bf16-mixed where native (vitpos/runtime.py)
    # the datamodules shard evaluation over DDP ranks themselves, without the
    # padding DistributedSampler adds, so DDP metrics equal one process's exactly
    trainer_opts["use_distributed_sampler"] = False
    if trainer_opts.get("enable_progress_bar", True):
        callbacks.append(progress_bar(f"{run_label(cfg)}/seed{cfg.seed}"))
    if not trainer_opts.setdefault("enable_model_summary", False):
        log.info(summary_line(module))  # one line instead of Lightning's table
    trainer = L.Trainer(logger=logger, callbacks=callbacks, **trainer_opts)
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    except DivergenceError as err:
        if trainer.is_global_zero:
            logger.experiment.add_scalar("run/diverged", 1.0, trainer.global_step)
            logger.experiment.add_text("run/status", f"diverged: {err}", trainer.global_step)
            logger.finalize("failed")
            write_status(out, "diverged", reason=str(err), epoch=trainer.current_epoch, step=trainer.global_step)
        raise
    except BaseException:
        if last is not None and last.interrupted is not None and trainer.is_global_zero:
            print(last.interrupted_message(trainer.current_epoch), flush=True)
        raise

    fit_seconds = timer.time_elapsed("train")  # now: loading the best checkpoint for testing reloads the timer too
    eval_start = time.perf_counter()
    best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
    results = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False, weights_only=True)
    metrics = {k: float(v) for k, v in (results[0] if results else {}).items()}
    if checkpoint is not None and checkpoint.best_model_score is not None:
        metrics["val/acc_best"] = float(checkpoint.best_model_score)
    if not trainer.is_global_zero:
        return metrics  # extrapolation, logging and metrics.json happen once, on rank 0

    from vitpos.extrapolate import evaluate_module

    kind = "len" if cfg.task.name == "sequence" else "res"
    extra = evaluate_module(  # fast_dev_run: one test batch per size, as Lightning's own loops
        module, datamodule, cfg.eval, kind, device=module.device, max_batches=1 if fast else None
    )
    metrics.update(extra)
    metrics["time/fit_min"] = fit_seconds / 60  # training + validation (+ compilation), over every resume
    metrics["time/eval_min"] = (time.perf_counter() - eval_start) / 60  # test + evaluation at other sizes
    if logger is not None:
        step = trainer.global_step
        logger.log_metrics({k: v for k, v in extra.items() if not math.isnan(v)}, step=step)
        params = sum(p.numel() for p in module.model.parameters())
        pos_params = sum(p.numel() for p in module.model.pos.parameters())
        metrics["params"], metrics["params_pos"] = float(params), float(pos_params)
        hparams = {
            "encoding": run_label(cfg),
            "model": OmegaConf.to_container(cfg.model, resolve=True),
            "data": str(cfg.data.name),
            "seed": int(cfg.seed),
        }
        logger.log_hyperparams(hparams, {f"hp/{k}": v for k, v in metrics.items() if not math.isnan(v)})
        logger.finalize("success")
    if not fast:  # the very last write: its presence means trained to max_epochs and tested
        write_status(
            out,
            "complete",
            metrics,
            max_epochs=cfg.trainer.get("max_epochs"),
            epochs=trainer.current_epoch,
            best_checkpoint=best,
        )
    print(format_metrics(metrics, out))
    print(next_commands(out, str(cfg.task.name)))
    return metrics


def format_metrics(metrics: dict[str, float], folder: Path) -> str:
    width = max(len(k) for k in metrics) if metrics else 0
    lines = [f"run folder: {folder}"] + [f"  {k:<{width}}  {v:.4f}" for k, v in sorted(metrics.items())]
    return "\n".join(lines)
