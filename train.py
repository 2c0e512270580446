"""``python train.py encoding=rope_2d``: the training command (:mod:`vitpos.command`; ``--help`` lists the options)."""

from vitpos.command import main

if __name__ == "__main__":
    main()
