"""The checks of a composed config, one module per role (plain options, data, model);
:func:`vitpos.validate.validate` runs them in order. None imports torch at module level: a bad
plain option is refused before torch loads (only the trainer keys need Lightning, and the model
checks the encodings)."""
