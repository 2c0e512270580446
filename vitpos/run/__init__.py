"""Everything about a run folder that is not training itself: ``identity`` (which folder a configuration
trains in, ``runs/<group>/<model>/<label>-<hash>/seed<k>``), ``status`` (``metrics.json``, how a run ended),
``resume`` (whether a command continues, reuses or refuses what the folder holds) and ``checkpoint``
(loading a checkpoint as data, never as code).
"""
