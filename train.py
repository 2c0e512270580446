"""Train one configuration: ``python train.py encoding=rope_2d`` (Hydra; ``-m`` sweeps).

The command itself is :mod:`vitpos.command`, which an installed vitpos runs as ``vitpos-train`` or
``python -m vitpos``; ``python train.py --help`` lists the options.
"""

from vitpos.command import main

if __name__ == "__main__":
    main()
