"""``train(cfg)``: one training run from a composed config (what ``train.py`` calls).

Builds the task and data, fits with Lightning's Trainer (checkpoints: best by
``val/acc`` and last), tests the best checkpoint, evaluates beyond the training
size (``eval``), logs pictures and final metrics to TensorBoard, and returns
the metrics.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("vitpos")


def run_label(cfg: DictConfig) -> str:
    """The run's name in TensorBoard: the encoding (combination parts joined by
    '+'), then ``@strategy`` when that is not the encoding's default."""
    if cfg.run.get("label"):
        return str(cfg.run.label)
    enc = cfg.encoding
    label = "+".join(enc.parts) if enc.name == "combo" else enc.name
    from vitpos.encodings import get_encoding_class

    strategy = enc.get("strategy")
    if strategy and enc.name != "combo" and strategy != get_encoding_class(enc.name).strategies[0]:
        label += f"@{strategy}"
    return label


def run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.run.root) / str(cfg.run.group) / run_label(cfg) / f"seed{cfg.seed}"


def build(cfg: DictConfig):
    """(LightningModule, LightningDataModule) for ``cfg.task.name``."""
    name = cfg.task.name
    if name == "classification":
        from vitpos.data.images import ImageDataModule
        from vitpos.tasks.classification import ImageClassifier

        data_opts = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if k != "num_classes"}
        datamodule = ImageDataModule(**data_opts)
        plain = OmegaConf.to_container(cfg, resolve=True)
        plain["data"]["num_classes"] = datamodule.num_classes
        return ImageClassifier(plain), datamodule
    if name == "sequence":
        from vitpos.tasks.sequence import build as build_sequence

        return build_sequence(cfg)
    raise ValueError(f"unknown task.name '{name}'; valid: classification, sequence (task=...)")


RUN_DEFINING = ("model", "encoding", "data", "optim", "task")


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
    """Refuse to continue a checkpoint trained with another model, encoding,
    data, optimizer or task (``trainer.max_epochs`` may change)."""
    import torch

    saved = torch.load(last, map_location="cpu", weights_only=False).get("hyper_parameters", {}).get("cfg", {})
    current = OmegaConf.to_container(cfg, resolve=True)
    diffs = [d for k in RUN_DEFINING for d in config_differences({k: saved.get(k)}, {k: current.get(k)})]
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
            log.info("resuming from %s", last)
            return str(last)
        if mode is True or mode == "true":
            raise FileNotFoundError(f"resume=true but {last} does not exist; use resume=auto to start fresh")
        return None
    if not Path(str(mode)).exists():
        raise FileNotFoundError(f"resume={mode}: no such checkpoint file")
    return str(mode)


def train(cfg: DictConfig) -> dict[str, float]:
    """Train, test and evaluate one configuration; returns every final metric."""
    L.seed_everything(cfg.seed, workers=True)
    out = run_dir(cfg)
    ckpt_dir = out / "checkpoints"
    fast = bool(cfg.trainer.get("fast_dev_run", False))
    ckpt_path = None if fast else resume_path(cfg, ckpt_dir)  # before anything is written to the folder
    module, datamodule = build(cfg)
    logger = TensorBoardLogger(
        save_dir=str(out.parent.parent),
        name=out.parent.name,
        version=out.name,
        **OmegaConf.to_container(cfg.logger, resolve=True),
    )
    callbacks = [LearningRateMonitor(logging_interval="step")]
    checkpoint = None
    if not fast:
        checkpoint = ModelCheckpoint(
            dirpath=str(ckpt_dir),
            filename="best-epoch{epoch:03d}",
            monitor="val/acc",
            mode="max",
            save_last=True,
            auto_insert_metric_name=False,
        )
        callbacks.append(checkpoint)
    if cfg.task.get("pictures", True):
        from vitpos.callbacks import PicturesCallback

        callbacks.append(PicturesCallback(cfg.task.get("pictures_every_n_epochs", 0)))
    trainer_opts = OmegaConf.to_container(cfg.trainer, resolve=True)
    trainer = L.Trainer(logger=logger, callbacks=callbacks, **trainer_opts)
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)

    best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
    results = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False)
    metrics = {k: float(v) for k, v in (results[0] if results else {}).items()}
    if checkpoint is not None and checkpoint.best_model_score is not None:
        metrics["val/acc_best"] = float(checkpoint.best_model_score)

    from vitpos.extrapolate import evaluate_module

    kind = "len" if cfg.task.name == "sequence" else "res"
    extra = evaluate_module(module, datamodule, cfg.eval, kind, device=module.device)
    metrics.update(extra)
    if trainer.is_global_zero and logger is not None:
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
    if trainer.is_global_zero:
        print(format_metrics(metrics, out))
    return metrics


def format_metrics(metrics: dict[str, float], folder: Path) -> str:
    width = max(len(k) for k in metrics) if metrics else 0
    lines = [f"run folder: {folder}"] + [f"  {k:<{width}}  {v:.4f}" for k, v in sorted(metrics.items())]
    return "\n".join(lines)
