"""Train one configuration: ``python train.py encoding=rope_2d`` (Hydra; ``-m`` sweeps).

See configs/train.yaml for every option and README.md for the recipes.
"""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float:
    from vitpos.data.cifar10 import DatasetNotFoundError
    from vitpos.train import train

    try:
        metrics = train(cfg)
    except DatasetNotFoundError as err:  # a message with the ways out, not a traceback
        raise SystemExit(f"error: {err}") from None
    return metrics.get("val/acc_best", metrics.get("test/acc", float("nan")))


if __name__ == "__main__":
    main()
