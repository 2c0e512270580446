"""Data: CIFAR-10 (official or ImageFolder), generated shapes, toy sequences; in memory, batch-augmented."""


def make_datamodule(data: dict, image: bool, seed: int = 0):
    """The data module of an image task (:class:`vitpos.data.images.ImageDataModule`; ``seed``: the batch
    order's) or a sequence task, from the config's ``data`` section; nothing is loaded, so the config check
    builds it too and its constructor refuses what it cannot take (an unknown key among them)."""
    if image:
        from vitpos.data.images import ImageDataModule

        return ImageDataModule(**{k: v for k, v in data.items() if k != "num_classes"}, shuffle_seed=seed)
    import inspect

    from vitpos.data.sequence import SequenceDataModule
    from vitpos.errors import UserError

    valid = list(inspect.signature(SequenceDataModule).parameters)
    for key in data:
        if key not in valid:
            raise UserError(f"data.{key}", "not an option of the sequence tasks", f"valid: {', '.join(sorted(valid))}")
    return SequenceDataModule(**data)
