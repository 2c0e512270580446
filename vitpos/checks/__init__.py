"""Checks of a composed config, one module per role (plain options, data, model), run in order by
:func:`vitpos.validate.validate`. None imports torch at module level, so a bad plain option is refused before
torch loads."""
