"""Names the run turns into folders, and the thread count: plain values checked before anything is written."""

from __future__ import annotations

from vitpos.errors import UserError

#: the config keys that become folder names under run.root (runs/<group>/<model>/<label>-<hash>/seed<k>)
RUN_FOLDER_KEYS = ("group", "model", "label")


def check_folder_name(option: str, value) -> None:
    """The one check of every run-folder component: a plain name, nothing that leaves ``run.root``."""
    text = str(value)
    if not text or text in (".", "..") or "/" in text or "\\" in text or text.startswith("~") or "\0" in text:
        raise UserError(
            option,
            f"must be a plain folder name, got {text!r}",
            "no '/', '..' or absolute path; use run.root=DIR to choose where runs go",
        )


def check_run_names(run: dict) -> None:
    """``run.group``, ``run.model`` and ``run.label`` become folder names under ``run.root``
    (null ``model``/``label``: the model config's name, the encoding's)."""
    for key in RUN_FOLDER_KEYS:
        value = run.get(key)
        if value is None and key != "group":
            continue
        check_folder_name(f"run.{key}", value)


def check_threads(threads) -> None:
    """``threads``: auto, a positive integer or null (the rule is :func:`vitpos.runtime.resolve_threads`)."""
    from vitpos.runtime import resolve_threads

    try:
        if isinstance(threads, bool):  # resolve_threads would take true for 1 thread
            raise ValueError(threads)
        resolve_threads(threads)
    except ValueError as err:
        raise UserError(
            "threads", f"{threads!r} is not a thread count", "valid: auto, a positive integer, or null"
        ) from err
