"""Repository tooling: it rebuilds and snapshots the committed reports under docs/ and takes
the README's screenshots. It is not part of the installed package (pyproject's package
discovery includes ``vitpos*`` only); the tests import it as ``scripts.<module>`` from the
repository root."""
