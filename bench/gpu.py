"""GPU check in one command (``bash bench/gpu.sh`` or ``python -m bench.run gpu``), within ~8 minutes:

1. the training-step table under bf16 autocast + ``torch.compile``, vitpos
   (learned_1d, rope_2d, rel_bias_2d) vs timm's ViT compiled, vit_tiny, batch 512;
2. time to accuracy of the GPU recipe (``experiment=compare_cifar_gpu``:
   d256/L7, TrivialAugment, Mixup/CutMix, EMA, bf16 + compile, ``learned_1d``):
   minutes to 80% and to 90% validation accuracy, or the accuracy reached when
   the time limit (6 minutes) runs out.

Refuses cleanly (exit code 2) where CUDA is not available.
"""

from __future__ import annotations

import time

import torch

from .timing import header, table


def step_table() -> None:
    from vitpos.models import VisionTransformer
    from vitpos.models.compile import CompiledForward
    from vitpos.tasks.optim import build_optimizer

    from .step import ONE_PER_KIND, SHAPES, make_step, timm_vit
    from .timing import interleaved_medians

    s, batch = SHAPES["vit_tiny"], 512
    x = torch.randn(batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    peer = timm_vit(s).cuda()
    peer_opt = torch.optim.AdamW(peer.parameters(), fused=True)
    steps = {"timm compiled bf16": make_step(peer, torch.compile(peer), peer_opt, x, y, True)}
    for name in ONE_PER_KIND:
        model = VisionTransformer(name, patch_size=4, drop_path=0.0, **s).cuda()
        opt = build_optimizer(model, 1e-3, 0.05)
        steps[f"vitpos {name} compiled bf16"] = make_step(model, CompiledForward(model), opt, x, y, True)
    times = interleaved_medians(steps, repeats=20, warmup=3)
    header(f"GPU training step, vit_tiny, batch {batch}, bf16 + compile")
    peer_t = times["timm compiled bf16"]
    table(["step", "ms", "img/s", "vs timm compiled bf16"],
          [[k, f"{t * 1e3:.2f}", f"{batch / t:,.0f}", f"{peer_t / t:.2f}x"] for k, t in times.items()])  # fmt: skip


def time_to_accuracy(minutes: float, root: str) -> None:
    import lightning as L
    from hydra import compose, initialize_config_dir

    from vitpos import CONFIG_DIR
    from vitpos.config import HYDRA_BASE
    from vitpos.tasks import build
    from vitpos.validate import validate

    with initialize_config_dir(str(CONFIG_DIR), **HYDRA_BASE):
        cfg = compose("train", overrides=["experiment=compare_cifar_gpu", "encoding=learned_1d",
                                          f"data.root={root}", "task.pictures=false"])  # fmt: skip
    validate(cfg)
    module, datamodule = build(cfg)
    marks: dict[float, float] = {}
    start = time.perf_counter()

    class Marks(L.Callback):
        def on_validation_epoch_end(self, trainer, pl_module):
            acc = float(trainer.callback_metrics.get("val/acc", 0.0))
            for goal in (0.8, 0.9):
                if acc >= goal and goal not in marks:
                    marks[goal] = (time.perf_counter() - start) / 60
            print(f"epoch {trainer.current_epoch}: val/acc {acc:.4f} at {(time.perf_counter() - start) / 60:.1f} min")
            if 0.9 in marks:
                trainer.should_stop = True

    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_epochs=cfg.trainer.max_epochs,
                        max_time={"minutes": minutes}, callbacks=[Marks()], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, gradient_clip_val=cfg.trainer.gradient_clip_val)  # fmt: skip
    trainer.fit(module, datamodule=datamodule)
    header(f"time to accuracy, GPU recipe (experiment=compare_cifar_gpu, learned_1d), limit {minutes} min")
    final = float(trainer.callback_metrics.get("val/acc", float("nan")))
    table(["goal", "minutes"], [[f"val/acc >= {g:.0%}", f"{marks[g]:.1f}" if g in marks else "not reached"]
                                for g in (0.8, 0.9)] + [["val/acc at the end", f"{final:.4f}"]])  # fmt: skip


def run(minutes: float = 6.0, root: str = "data/cifar10") -> int:
    if not torch.cuda.is_available():
        print("bench gpu: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with a GPU")
        return 2
    print(f"device: {torch.cuda.get_device_name()}")
    step_table()
    if minutes > 0:  # gpu_minutes=0: the step table alone (scripts/device_check.sh: the sweep measures accuracy)
        time_to_accuracy(minutes, root)
    return 0
