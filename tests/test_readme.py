"""The README and the docs, followed top to bottom, work: a README that is tested.

The replayed pages are ``PAGES``: README.md first, then every ``docs/*.md`` in
a fixed order (a page in ``docs/`` that is not listed fails
``test_every_doc_page_is_replayed``). Every command in their ```bash blocks is
either replayed here, in that order, at smoke scale, or listed in ``SKIP``
with the reason it cannot run in CI. Every ```python block is run as a script
(``python FILE`` in the same working directory), unless its first line is in
``SKIP_PYTHON`` with the reason (a file to add to the package is not a
script). A new command or block that is in neither place fails
``test_every_readme_command_is_covered``, so an example can never drift out of
the test; relative links in the pages must resolve
(``test_relative_links_resolve``). After the pages, the examples of every
tool's ``--help`` (``HELP_TOOLS``) are replayed the same way.

The replay runs in a temporary working directory shaped like a fresh clone
after the README's own data step: ``train.py``, ``configs/`` and ``bench/`` are
links to this checkout, ``data/cifar10`` links to the unpacked CIFAR-10 copy,
``../shared`` to the shared folder, and ``runs/`` and every output folder are
new. Commands therefore see only what earlier README commands produced (a
``viz`` or ``compare`` on a run the reader has not made fails), and nothing is
written into the checkout. Each command must exit 0 without a ``Traceback``,
and at the end the working directory must hold only the folders the commands
name (``--out X``, ``out=X``) and those in ``EXPECTED`` (no Hydra ``outputs/``,
no ``lightning_logs/``).

Smoke scale comes from overrides added to each command (``RUNNERS``): one
epoch of a couple of batches per stage (``trainer.limit_*``) and small
evaluations (``eval.*``, test subsets); the model and the data set stay the
README's. An override whose key the command already gives replaces that word
in place (the tools refuse a key given twice); the others are appended. A
command that a page repeats word for word in a later section is replayed once.
Sweeps run 2 of their encodings with one seed by overriding the swept keys on
the command line, which replaces the experiment's ``hydra.sweeper.params`` for
those keys. The overrides are part of a run's configuration, so they change
the config hash in its folder name (``runs/<group>/<model>/<label>-<hash>``);
``with_smoke_hashes`` points a README path at the run an earlier command made
that differs only in that hash.

Every command runs in a real shell, as the reader runs it (``bash -c``), with ``python`` on the
PATH being this interpreter; the ``--help`` texts whose examples are replayed are read in process
(each tool's ``main(["--help"])``). ``VITPOS_REPLAY_TIMES=FILE`` writes each replayed step's
wall seconds to FILE (JSON, slowest first): where the replay's minutes go.

Commands must not depend on the machine: a run folder's hash includes the resolved precision
(``trainer.precision=auto``: bf16-mixed on a CPU with native bf16, 32-true elsewhere), so a command
that names a hash works on one kind of machine only. ``test_commands_name_no_run_hash`` refuses a
literal hash (and a literal ``out=...``) in any command; ``VITPOS_REPLAY_PRECISION=other`` (or
``32-true``, ``bf16-mixed``) replays every training with that precision instead, as the other kind
of machine would run it; and ``test_run_commands_work_with_the_other_precision`` always does so
for the first single run of the pages (docs/running.md) and every command that reads it
(``ckpt=runs/shapes/...``), with the commands that run prints after ``next:``, each run as written.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cifar_root, compose_train, run_command

from vitpos.run.identity import config_hash
from vitpos.runtime import resolve_precision

README = ROOT / "README.md"
# The pages replayed, in this order: README first, then the docs in the order a reader follows
# them (each command may need what an earlier one made: the viz and extrapolate commands of
# extrapolation.md and compare.md read the quick sweep that results.md runs).
PAGES = (
    "README.md",
    "docs/encodings.md",
    "docs/running.md",  # the first sincos_2d run that later pages read (export.md, extrapolation.md)
    "docs/recipe.md",
    "docs/preregistration.md",
    "docs/results.md",
    "docs/leaderboard.md",
    "docs/extrapolation.md",
    "docs/sequences.md",
    "docs/compare.md",
    "docs/export.md",  # exports the sincos_2d run of the README
    "docs/performance.md",
    "docs/cluster.md",
    "docs/reliability.md",
    "docs/architecture.md",
)

# Lightning Trainer limits: a couple of batches per stage. `++` adds the key or
# overrides it if a trainer config ever sets it.
LIMITS = [
    "++trainer.limit_train_batches=2",
    "++trainer.limit_val_batches=1",
    "++trainer.limit_test_batches=1",
]

# Every replayed training runs one epoch, eager: the README's recipes run 8-13 epochs, which at two
# batches each cost ~1 s apiece (validation, checkpoints) and show nothing one epoch does not;
# torch.compile costs ~40 s per run on these CPUs and changes only the speed (tests/test_compile.py
# checks compiled training against eager; tests/test_resume.py a multi-epoch resume).
TRAIN_SMOKE = [*LIMITS, "++trainer.max_epochs=1", "model.compile=false"]

# Commands that cannot run in CI, by prefix, with the reason.
SKIP = {
    "python -m vitpos.benchmark": (
        "trains the encoding under three committed protocols (75 minutes to 12 hours on 2 cores); "
        "tests/test_benchmark.py runs the same command end to end at a tiny scale"
    ),
    "python -m bench.step_cost": "times every encoding's training step (minutes, on a quiet machine)",
    "pip install": "installs packages: .ci/run runs this install itself before the tests",
    "python -m venv": "creates a virtual environment: .ci/run installs into its own before the tests",
    "python train.py encoding=learned_1d": (
        "downloads the official CIFAR-10 release (no network in CI); the same run on the offline copy, "
        "the README's next command, is replayed"
    ),
    "python -m pytest": "the test suite itself, of which this test is a part",
    "tensorboard": "a server that runs until stopped: tests/test_tensorboard.py starts it and checks its HTTP API",
    "bash bench/gpu.sh": "needs a CUDA GPU",
    "bash scripts/gpu_sweep.sh": (
        "ten training jobs on a CUDA GPU; tests/test_gpu_sweep.py runs this script on a CPU at a tiny size"
    ),
    "python -m bench.run sweep": (
        "two 4-job training sweeps timed on a quiet machine (minutes); threads per side-by-side job are "
        "tested in tests/test_fast_paths.py::test_threads_per_job"
    ),
    "python -m bench.run step compile_all=true": (
        "torch.compile of every encoding (minutes); `python -m bench.run step rope` is replayed at quick=true"
    ),
    "python scripts/rebuild_reports.py": "rewrites the committed reports in docs/ (tracked files), by design",
    "python train.py -m experiment=compare_cifar_full seed=0,1,2 trainer=gpu hydra/launcher=vitpos_slurm": (
        "submits GPU jobs to a SLURM cluster; the vitpos_local dry run of docs/cluster.md is replayed"
    ),
    "python train.py -m experiment=compare_cifar_full encoding=rope_2d seed=0 trainer=ddp": (
        "two SLURM nodes of 4 GPUs each; tests/test_ddp_torchrun.py runs the DDP path on CPU processes"
    ),
    "python train.py -m experiment=compare_cifar_gpu seed=0,1 hydra/launcher=vitpos_slurm": (
        "a SLURM cluster with GPUs; tests/test_submitit.py composes it (no joblib option left with the launcher)"
    ),
    "srun": "inside a SLURM allocation of GPU nodes",
    "torchrun --nnodes=2": "two GPU nodes; tests/test_ddp_torchrun.py runs the DDP path on CPU processes",
    "OMP_NUM_THREADS=1 torchrun --standalone": (
        "two CPU processes with gloo on the whole shapes set; tests/test_ddp_torchrun.py runs it at a smaller size"
    ),
    "python train.py encoding=rope_2d": (
        "downloads the official CIFAR-10 release (170 MB, needs network) and trains the full recipe; "
        "the ImageFolder commands replayed here run the same code on the local copy"
    ),
}

# Commands replayed, by prefix (the longest matching prefix wins), with the
# overrides that make them tiny.
RUNNERS = {
    "bash ../shared/datasets/unpack-cifar10.sh": [],  # returns at once: data/cifar10/.complete exists
    "python train.py": [*TRAIN_SMOKE, "eval.resolutions=[24]"],
    # the quick start: two encodings x two seeds, eager vit_micro; its own max_epochs is replaced
    "python train.py -m data=shapes": [
        *TRAIN_SMOKE,
        "data.num_test=256",
        "data.val_size=128",
        "eval.resolutions=[24]",
        "eval.test_subset=128",
    ],
    "python train.py data=shapes": [
        *TRAIN_SMOKE,
        "data.num_test=256",
        "data.val_size=128",
        "eval.resolutions=[24]",
        "eval.test_subset=128",  # half of the 256 test images: the subset path, as the default takes it
    ],
    # the non-square sizes example: its own eval.resolutions are the point, so they stay
    "python train.py data=shapes model=vit_micro": [*TRAIN_SMOKE, "data.num_test=256", "data.val_size=128"],
    "python train.py data.format=imagefolder": [*TRAIN_SMOKE, "data.test_subset=500", "eval.resolutions=[24,32]"],
    "python train.py task=sequence": [*TRAIN_SMOKE, "eval.lengths=[32,128]"],
    "python train.py -m experiment=compare_cifar_quick": [
        *TRAIN_SMOKE,
        "encoding=none,rope_2d",
        "seed=0",
        "data.test_subset=500",  # x 5 strategies x 2 sizes for rope_2d
        "eval.resolutions=[32,48]",
    ],
    "python train.py -m experiment=recipe_ablation": [
        *TRAIN_SMOKE,
        "ablation=base,trivial",  # the joblib launcher's two jobs side by side, one thread each
        "data.test_subset=500",
    ],
    "python train.py -m experiment=recipe_levers": [
        *TRAIN_SMOKE,
        "ablation=base,progressive",
        "data.test_subset=500",
    ],
    "python train.py -m experiment=compare_cifar_full": [
        *TRAIN_SMOKE,
        "encoding=none,rope_2d",
        "seed=0",
        "data.test_subset=500",
        "eval.resolutions=[32,48]",
        "eval.test_subset=200",
    ],
    "python train.py -m experiment=extrapolation_native": [
        *TRAIN_SMOKE,
        "encoding=none,lookhere",
        "seed=0",
        "data.test_subset=300",
        "eval.test_subset=100",
        "eval.resolutions=[16,32,48]",
    ],
    "python train.py -m experiment=extrapolation_aspect": [
        *TRAIN_SMOKE,
        "encoding=none,rope_2d",
        "seed=0",
        "data.test_subset=300",
        "eval.test_subset=100",
    ],
    "python train.py -m experiment=extrapolation_multires": [
        *TRAIN_SMOKE,
        "encoding=none,lookhere",
        "data.test_subset=300",
        "eval.test_subset=100",
        "eval.resolutions=[16,32]",
    ],
    "python train.py -m experiment=compare_sequence": [
        *TRAIN_SMOKE,
        "encoding=rope_1d,alibi",
        "seed=0",
        "eval.lengths=[32,128]",
    ],
    "python -m vitpos.compare": [],
    "python -m vitpos.viz": [],
    "python -m vitpos.export": [],  # a vit_cpu graph checked at three sizes: seconds, nothing to shrink
    "python -m vitpos.extrapolate": [],
    "python -m vitpos.extrapolate ckpt=runs/shapes/": ["resolutions=[24,32]", "data.num_test=256"],
    "python -m vitpos.extrapolate ckpt=runs/compare_cifar_quick/": ["resolutions=[32,48]", "data.test_subset=500"],
    "python -m vitpos.extrapolate ckpt=runs/compare_cifar_quick": ["data.test_subset=500"],  # the --help example
    "python -m vitpos.extrapolate ckpt=runs/compare_sequence/": ["lengths=[32,128]"],
    "OMP_NUM_THREADS=1 python bench/bench_rope.py": ["--batch", "2", "--tokens", "16"],
    "OMP_NUM_THREADS=1 python bench/bench_vit.py": ["--batch", "8", "--encodings", "none,rope_2d"],
    # one torch thread: the replay's worker has one core, and the README's threads=2 beside the other
    # worker oversubscribes OpenMP (`bench.run step rope` took 121 s in the suite instead of 13)
    "python -m bench.run": ["quick=true", "threads=1"],
    "python -m bench.run quick=true": ["rope", "threads=1"],  # one part: all of them take minutes even at quick=true
}

# What the replay directory holds besides the command outputs (links made below).
LINKED = ("train.py", "configs", "bench", "docs")  # docs: the example plug-in file
# Folders the commands write without naming them, each one the README explains.
EXPECTED = {
    "data": "the README's data step (unpack-cifar10.sh data) and the decoded-data cache",
    "runs": "every run folder (run.root)",
    "multirun": "Hydra's sweep folder for -m, read by `python -m vitpos.compare multirun=multirun/...`",
}
TIMEOUT_S = 900  # per command; a hang fails the test instead of blocking CI

# ```python blocks that are not scripts, by their first line, with the reason.
SKIP_PYTHON = {
    "# a new module in vitpos/encodings/, here my_encoding.py (every module of the package is imported)": (
        "a file to add to the package (relative imports), not a script; the registry-wide tests "
        "(tests/test_registry.py) run every registered encoding"
    ),
}

FENCE = re.compile(r"^```(bash|python)[ \t]*\n(.*?)^```", flags=re.M | re.S)


def bash_commands(block: str) -> list[str]:
    """Every command of one ```bash block, comments dropped, re-quoted by
    ``shlex.join`` (so ``'a=[1,2]'`` stays one word)."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


def page_steps(text: str) -> list[tuple[str, str]]:
    """("bash", command) for every command and ("python", code) for every
    ```python block, in the page's order."""
    steps = []
    for lang, block in FENCE.findall(text):
        steps += [("bash", c) for c in bash_commands(block)] if lang == "bash" else [("python", block)]
    return steps


def readme_commands(text: str) -> list[str]:
    """Every command in the ```bash blocks of ``text``, in order."""
    return [code for kind, code in page_steps(text) if kind == "bash"]


# The tools whose ``--help`` examples are replayed after the pages (every command in the README
# and in --help texts runs as written), in this order.
HELP_TOOLS = (
    "python train.py",
    "python -m vitpos.compare",
    "python -m vitpos.extrapolate",
    "python -m vitpos.viz",
    "python -m vitpos.export",
    "python -m bench.run",
)


def help_examples(text: str, tool: str) -> list[str]:
    """The commands of the "Examples:" part of a ``--help`` text (the indented lines after that
    heading, up to the first blank line) that start with ``tool``, comments dropped."""
    commands, inside = [], False
    for line in text.splitlines():
        if line.strip() == "Examples:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside and line.strip().startswith(tool + " "):
            commands.append(shlex.join(shlex.split(line, comments=True)))
    return commands


_HELP_STEPS: list[tuple[str, str, str]] = []


def help_steps() -> list[tuple[str, str, str]]:
    """("<tool> --help", "bash", command) for every example of every tool in ``HELP_TOOLS``
    (each ``--help`` is read once per test process, in process)."""
    if not _HELP_STEPS:
        for tool in HELP_TOOLS:
            prog = shlex.split(tool)[-1]  # train.py, vitpos.compare, ...
            ran = run_command(prog, "--help", cwd=ROOT)
            assert ran.code == 0, f"{tool} --help failed:\n{ran.out[-2000:]}{ran.err[-2000:]}"
            examples = help_examples(ran.out, tool)
            assert examples, f"{tool} --help lists no examples (an 'Examples:' part)"
            _HELP_STEPS.extend((f"{tool} --help", "bash", c) for c in examples)
    return _HELP_STEPS


def all_steps() -> list[tuple[str, str, str]]:
    """(page, kind, code) for every step of every page in ``PAGES``, in order, then every
    ``--help`` example of ``HELP_TOOLS``."""
    pages = [(page, kind, code) for page in PAGES for kind, code in page_steps((ROOT / page).read_text())]
    return pages + help_steps()


def classify_python(code: str) -> tuple[str, object]:
    """("skip", reason) for a block listed in ``SKIP_PYTHON``, else ("run", None)."""
    first = code.strip().splitlines()[0].strip() if code.strip() else ""
    return ("skip", SKIP_PYTHON[first]) if first in SKIP_PYTHON else ("run", None)


def with_overrides(command: str, extra: list[str]) -> str:
    """``command`` with the smoke overrides ``extra``: an override whose key the
    command already gives (``key=...``, ``+key=...``, ``++key=...``) replaces
    that word in place, any other is appended (flags such as ``--quick`` too)."""
    words = shlex.split(command)

    def key(word: str) -> str | None:
        name, sep, _ = word.partition("=")
        return name.lstrip("+") if sep and not name.startswith("-") else None

    for x in extra:
        at = [i for i, w in enumerate(words) if key(x) is not None and key(w) == key(x)]
        if at:
            words[at[0]] = x
            words = [w for i, w in enumerate(words) if i not in at[1:]]
        else:
            words.append(x)
    return shlex.join(words)


def _longest_prefix(command: str, table: dict) -> str | None:
    """The longest key of ``table`` that starts ``command`` at a word boundary
    (a key ending in "/" matches any path below it). The command is compared
    unquoted: ``shlex.join`` quotes a word holding ``*`` or ``[``."""
    command = " ".join(shlex.split(command))
    hits = [p for p in table if command == p or command.startswith(p if p.endswith("/") else p + " ")]
    return max(hits, key=len, default=None)


def classify(command: str) -> tuple[str, object] | None:
    """("skip", reason), ("run", overrides), or None when the command is covered
    by neither table."""
    skip, run = _longest_prefix(command, SKIP), _longest_prefix(command, RUNNERS)
    if skip is not None and (run is None or len(skip) >= len(run)):
        return "skip", SKIP[skip]
    if run is not None:
        return "run", RUNNERS[run]
    return None


def output_folders(commands: list[str]) -> set[str]:
    """Top-level folders the commands are asked to write (``--out X``, ``out=X``)."""
    names = set()
    for command in commands:
        words = shlex.split(command)
        for i, word in enumerate(words):
            target = words[i + 1] if word == "--out" and i + 1 < len(words) else None
            if word.startswith("out="):
                target = word[4:]
            if target:
                names.add(Path(target).parts[0])
    return names


def test_every_readme_command_is_covered():
    steps = all_steps()
    commands = [(page, code) for page, kind, code in steps if kind == "bash"]
    assert len(readme_commands(README.read_text())) >= 5, "found under 5 README commands: did the parser break?"
    uncovered = [f"{page}: {c}" for page, c in commands if classify(c) is None]
    assert not uncovered, (
        "commands neither replayed nor skipped; add each to RUNNERS (with smoke overrides) "
        f"or to SKIP (with the reason) in {Path(__file__).name}:\n  " + "\n  ".join(uncovered)
    )
    blocks = [(page, code) for page, kind, code in steps if kind == "python"]
    assert any(page == "README.md" and classify_python(code)[0] == "run" for page, code in blocks), (
        "README.md has no ```python block that runs (its snippet 'Use an encoding in your own model')"
    )
    for page, code in blocks:
        if classify_python(code)[0] == "run":
            compile(code, f"{page} ```python block", "exec")  # a syntax error fails here, before the slow replay
    firsts = {code.strip().splitlines()[0].strip() for _, code in blocks if code.strip()}
    stale = sorted(set(SKIP_PYTHON) - firsts)
    assert not stale, f"SKIP_PYTHON names blocks no page has any more: {stale}"


#: the README is the front page: what vitpos is, install, a quick start, results and pointers; the rest is in docs/
README_MAX_LINES = 200


def test_the_readme_is_a_front_page():
    """The README stays short enough to read in a few minutes, and opens with the install and the quick start."""
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; move detail to docs/ (at most {README_MAX_LINES})"
    )
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Install", "## Quick start: two encodings, one table"], headings


def test_every_doc_page_is_replayed():
    pages = {"README.md"} | {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert pages == set(PAGES), (
        f"PAGES in {Path(__file__).name} must list README.md and every docs/*.md, in reading order: "
        f"missing {sorted(pages - set(PAGES))}, not on disk {sorted(set(PAGES) - pages)}"
    )


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page (lower case,
    punctuation dropped, spaces to hyphens; code blocks are not headings)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    anchors = set()
    for title in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", "")).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_relative_links_resolve():
    """Every relative link and image of the replayed pages points at a file
    that exists, and every #anchor at a heading of its page."""
    broken = []
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()
        prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{page}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest.read_text()):
                broken.append(f"{page}: {target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, "broken links:\n  " + "\n  ".join(broken)


def test_parser_keeps_quoted_words_and_drops_comments():
    text = "```bash\npython train.py 'encoding.parts=[a,b]' x=1   # a comment\n# only a comment\n```\n"
    assert readme_commands(text) == ["python train.py 'encoding.parts=[a,b]' x=1"]
    page = text + "```python\nprint(1)\n```\n```yaml\nname: x\n```\n```python\n# vitpos/encodings/my_encoding.py\n```\n"
    assert page_steps(page) == [
        ("bash", "python train.py 'encoding.parts=[a,b]' x=1"),
        ("python", "print(1)\n"),
        ("python", "# vitpos/encodings/my_encoding.py\n"),
    ]
    assert classify_python("print(1)\n") == ("run", None)
    assert classify("python train.py data=shapes x=1") == ("run", RUNNERS["python train.py data=shapes"])
    assert classify("pip install -e .")[0] == "skip"
    assert classify("rm -rf runs") is None
    quoted = shlex.join(["python", "-m", "vitpos.extrapolate", "ckpt=runs/shapes/vit_cpu/x-*/seed0", "out=e"])
    assert classify(quoted) == ("run", RUNNERS["python -m vitpos.extrapolate ckpt=runs/shapes/"])


def test_help_examples_are_the_lines_under_the_examples_heading():
    text = (
        "usage: python -m tool [x=1]\n\nExamples:\n  python -m tool a=1   # one\n  python -m tool 'b=[1,2]'\n"
        "  see python -m tool c=3\n\nOptions:\n  python -m tool d=4\n"
    )
    assert help_examples(text, "python -m tool") == ["python -m tool a=1", "python -m tool 'b=[1,2]'"]


def test_overrides_replace_a_key_the_command_gives():
    command = "python -m vitpos.extrapolate ckpt=a resolutions=[16,32,64] out=x"
    assert with_overrides(command, ["resolutions=[24,32]", "data.num_test=256"]) == (
        "python -m vitpos.extrapolate ckpt=a 'resolutions=[24,32]' out=x data.num_test=256"
    )
    train = "python train.py task=sequence trainer.max_epochs=2"
    assert with_overrides(train, ["++trainer.max_epochs=1", "--quick"]) == (
        "python train.py task=sequence ++trainer.max_epochs=1 --quick"
    )


# the config hash (or the README's `-*` glob) in runs/<group>/<model>/<label>-<hash>/seed<k>
HASH = re.compile(r"-(?:[0-9a-f]{6}|\*)(?=/|$)")


def with_smoke_hashes(command: str, work: Path) -> str:
    """``command`` with each run path whose config hash the smoke overrides changed
    replaced by the one run folder that differs from it only in that hash.

    The smoke overrides are part of a run's configuration, so its folder's hash
    differs from the one the README prints; group, model, encoding and seed
    must still match a run that an earlier README command made."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        key, sep, path = word.rpartition("=") if "=" in word else ("", "", word)
        if "runs/" not in path or (work / path).exists() or not HASH.search(path):
            continue
        found = sorted(work.glob(HASH.sub("-*", path)), key=lambda f: f.stat().st_mtime)
        if found:  # several: the run an earlier command made last
            words[i] = key + sep + str(found[-1].relative_to(work))
    return shlex.join(words)


def test_readme_run_paths_follow_the_smoke_hash(tmp_path):
    (tmp_path / "runs/g/m/rope_2d-0a1b2c/seed0").mkdir(parents=True)
    (tmp_path / "runs/g/m/rope_2d_mixed-99aa00/seed0").mkdir(parents=True)
    readme = "python -m vitpos.viz ckpt=runs/g/m/rope_2d-ffffff/seed0 out=viz/"
    assert with_smoke_hashes(readme, tmp_path) == "python -m vitpos.viz ckpt=runs/g/m/rope_2d-0a1b2c/seed0 out=viz/"
    other_seed = "python -m vitpos.viz ckpt=runs/g/m/rope_2d-ffffff/seed1"
    assert with_smoke_hashes(other_seed, tmp_path) == other_seed  # no such run: left for the command to fail


def other_precision() -> str:
    """The precision ``trainer.precision=auto`` gives on the other kind of CPU than this one."""
    return "32-true" if resolve_precision("auto", "cpu") == "bf16-mixed" else "bf16-mixed"


def forced_precision() -> str | None:
    """``VITPOS_REPLAY_PRECISION``: ``other`` (:func:`other_precision`), a precision such as
    ``32-true``, or unset (each training resolves ``auto`` as on this machine)."""
    value = os.environ.get("VITPOS_REPLAY_PRECISION") or None
    return other_precision() if value == "other" else value


def with_precision(command: str, precision: str | None) -> str:
    """``command`` with ``trainer.precision=precision`` when it is a training (``python train.py``)."""
    is_training = shlex.split(command)[:2] == ["python", "train.py"]
    return with_overrides(command, [f"trainer.precision={precision}"]) if precision and is_training else command


def test_with_precision_touches_trainings_only():
    assert (
        with_precision("python train.py data=shapes", "32-true")
        == "python train.py data=shapes trainer.precision=32-true"
    )
    assert with_precision("python train.py trainer.precision=bf16-mixed", "32-true") == (
        "python train.py trainer.precision=32-true"
    )
    assert with_precision("python -m vitpos.viz ckpt=runs/x", "32-true") == "python -m vitpos.viz ckpt=runs/x"
    assert with_precision("python train.py data=shapes", None) == "python train.py data=shapes"
    assert {other_precision(), resolve_precision("auto", "cpu")} == {"32-true", "bf16-mixed"}


# a literal run hash in a path (runs/<group>/<model>/<label>-<hash>/...): it holds the resolved precision
LITERAL_HASH = re.compile(r"runs/\S*-[0-9a-f]{6}(?=/|\s|$)")


def test_commands_name_no_run_hash():
    """No command of the pages or of a tool's --help names a run hash (it differs between machine
    kinds: use the ``-*`` pattern the tools expand, or the run folder), and no command or printed
    line in any block ends in a literal ``out=...`` that a reader would copy."""
    bad = [f"{page}: {code}" for page, kind, code in all_steps() if kind == "bash" and LITERAL_HASH.search(code)]
    assert not bad, "commands that name a run hash (machine-dependent; use sincos_2d-*):\n  " + "\n  ".join(bad)
    for page in PAGES:
        for block in re.findall(r"^```[^\n]*\n(.*?)^```", (ROOT / page).read_text(), flags=re.M | re.S):
            dots = [line for line in block.splitlines() if re.search(r"\bout=\.\.\.", line)]
            assert not dots, f"{page}: lines ending in a literal out=...: {dots}"
    assert LITERAL_HASH.search("python -m vitpos.viz ckpt=runs/shapes/vit_cpu/sincos_2d-3fb1a4/seed0")
    assert not LITERAL_HASH.search("python -m vitpos.viz ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0")


def replay_dir(tmp_path: Path, cifar: Path) -> Path:
    """A working directory shaped like a clone after the README's data step."""
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    work = tmp_path / "repo"
    (work / "data").mkdir(parents=True)
    (work / "data" / "cifar10").symlink_to(cifar)
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    return work


def replay_step(argv: list[str], shown: str, work: Path, log: Path) -> tuple[str, str | None]:
    """Run one replayed command in ``work`` as a reader would (this interpreter's ``python`` first on
    PATH), write ``$ shown`` and its output to ``log``; (output, None) when it exits 0 without a
    traceback, else (output, the failure as the test reports it)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    log.write_text(f"$ {shown}\n{out}")
    failed = proc.returncode != 0 or "Traceback" in out
    return out, f"$ {shown}\nexit {proc.returncode}\n{out[-3000:]}" if failed else None


@pytest.mark.slow
@pytest.mark.long
def test_readme_commands_run_in_order_at_smoke_scale(tmp_path):
    cifar = cifar_root()
    if cifar is None:
        pytest.skip("needs the CIFAR-10 copy: run `bash ../shared/datasets/unpack-cifar10.sh data`")
    work = replay_dir(tmp_path, cifar)
    failures, ran, replayed, seconds = [], [], set(), []
    for i, (page, lang, code) in enumerate(all_steps()):
        if lang == "python":
            if classify_python(code)[0] != "run" or code in replayed:
                continue
            replayed.add(code)
            script = tmp_path / f"{i:03d}_snippet.py"  # outside the working directory: it must stay clean
            script.write_text(code)
            argv, full = ["python", str(script)], f"python <<'EOF'  # {page}\n{code}EOF"
        else:
            kind, extra = classify(code) or ("uncovered", None)
            if kind != "run":
                continue
            if code.startswith("bash ../shared/") and not (ROOT.parent / "shared").is_dir():
                continue  # the shared folder is not beside this clone; data comes from VITPOS_CIFAR_ROOT
            full = with_precision(with_overrides(with_smoke_hashes(code, work), extra), forced_precision())
            if full in replayed:  # a command a page repeats in a later section: it ran above, unchanged
                continue
            replayed.add(full)
            argv = ["bash", "-c", full]
            ran.append(code)
        start = time.perf_counter()
        _, failure = replay_step(argv, full, work, tmp_path / f"{i:03d}.log")
        seconds.append((round(time.perf_counter() - start, 1), page, full.splitlines()[0]))
        if failure:
            failures.append(f"{page}:\n{failure}")
    if os.environ.get("VITPOS_REPLAY_TIMES"):  # where the suite's minutes go: each step's wall seconds, slowest first
        Path(os.environ["VITPOS_REPLAY_TIMES"]).write_text(json.dumps(sorted(seconds, reverse=True), indent=1))
    allowed = set(LINKED) | set(EXPECTED) | output_folders(ran)
    leftovers = sorted(p.name for p in work.iterdir() if p.name not in allowed)
    if leftovers:
        failures.append(f"folders the README did not ask for, left in the working directory: {leftovers}")
    assert ran, "no README command was replayed"
    assert not failures, f"{len(failures)} problem(s) replaying the README and docs:\n\n" + "\n\n".join(failures)


#: the RUNNERS key of the first single run of the pages (``python train.py data=shapes trainer.max_epochs=1``,
#: docs/running.md); the quick start before it pins its precision, so it runs the same on every machine
FIRST_RUN = "python train.py data=shapes"


def first_run_and_readers() -> list[tuple[str, str, list[str]]]:
    """(page, command, smoke overrides) of the pages' first single run and of every command of the
    pages and the --help examples that reads what it makes (``runs/shapes``), in order, each once:
    a command that differs from an earlier one only in its ``out=`` or the order of its words
    (a --help example of a page's command) is left out, and so is one that also reads a sweep's ``multirun=``
    folder (no sweep runs here; the full replay runs each such command after its sweep)."""
    chosen, seen = [], set()
    for page, kind, code in all_steps():
        how = classify(code) if kind == "bash" else None
        if how is None or how[0] != "run":
            continue
        if not chosen and _longest_prefix(code, RUNNERS) != FIRST_RUN:
            continue  # before the first run: nothing there reads it
        key = tuple(sorted(w for w in shlex.split(with_overrides(code, how[1])) if not w.startswith("out=")))
        reads_a_sweep = "multirun=" in code  # a sweep's folder: only the full replay runs the sweep first
        if (
            key not in seen
            and not reads_a_sweep
            and (_longest_prefix(code, RUNNERS) == FIRST_RUN or "runs/shapes" in code)
        ):
            seen.add(key)
            chosen.append((page, code, how[1]))
    return chosen


def printed_next(out: str) -> list[str]:
    """The tool commands a training printed after ``next:`` (the TensorBoard server left out)."""
    lines = out.split("\nnext:\n", 1)[1].splitlines() if "\nnext:\n" in out else []
    return [line.strip() for line in lines if line.startswith("  python -m ")]


@pytest.mark.slow
def test_run_commands_work_with_the_other_precision(tmp_path):
    """The pages' first single run trained as the other kind of machine trains it (its precision, so its
    own run hash), then every command that reads it, as written (no hash rewritten), then the
    commands that run printed: each exits 0 without a traceback."""
    steps = first_run_and_readers()
    assert steps[0][1].startswith(FIRST_RUN) and any("ckpt=" in code for _, code, _ in steps), steps
    precision = other_precision()
    work = tmp_path / "repo"
    (work / "data").mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    failures, nexts = [], []
    for i, (page, code, extra) in enumerate(steps):
        full = with_precision(with_overrides(code, extra), precision)
        out, failure = replay_step(["bash", "-c", full], full, work, tmp_path / f"{i:03d}.log")
        if failure:
            failures.append(f"{page}:\n{failure}")
        if i == 0:  # the first run: its folder carries this precision's hash, not this machine's own
            words = shlex.split(full)[2:]
            folder = re.search(r"^run folder: (\S+)$", out, flags=re.M)
            assert folder, out[-3000:]
            native = [w for w in words if not w.startswith("trainer.precision=")]
            forced, own = config_hash(compose_train(*words)), config_hash(compose_train(*native))
            assert Path(folder[1]).parent.name == f"sincos_2d-{forced}" and forced != own, (folder[1], own)
            nexts = printed_next(out)
    assert len(nexts) >= 3, f"the first run printed no next: commands ({nexts})"
    for j, command in enumerate(nexts):
        assert "..." not in command, command
        _, failure = replay_step(["bash", "-c", command], command, work, tmp_path / f"next{j}.log")
        if failure:
            failures.append(f"printed after next:\n{failure}")
    assert not failures, f"{len(failures)} command(s) failed at trainer.precision={precision}:\n\n" + "\n\n".join(
        failures
    )
