"""The command line, in and out: :mod:`vitpos.cli.options` (the ``key=value`` options of every tool and
``bench``), :mod:`vitpos.cli.hydra_errors` (Hydra's composition errors of ``train.py`` as one line) and
:mod:`vitpos.cli.console` (a user error as one line, exit code 2; the quiet training console)."""
