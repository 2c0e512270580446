"""``python -m vitpos ARGS``: the training command, ``python train.py ARGS`` of the repository
(:mod:`vitpos.command`), for an installed vitpos."""

from vitpos.command import main

if __name__ == "__main__":
    main()
