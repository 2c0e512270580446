"""The README, followed top to bottom, works (issue 13: "README that is tested").

Every command in the README's ```bash blocks is either replayed here, in the
README's order, at smoke scale, or listed in ``SKIP`` with the reason it
cannot run in CI. A new README command that is in neither place fails
``test_every_readme_command_is_covered``, so an example can never drift out of
the test.

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

Smoke scale comes from overrides appended to each command (``RUNNERS``): one
epoch of a couple of batches per stage (``trainer.limit_*``) and small
evaluations (``eval.*``, test subsets); the model and the data set stay the
README's. A command the README repeats word for word in a later section is
replayed once.
Sweeps run 2 of their encodings with one seed by overriding the swept keys on
the command line, which replaces the experiment's ``hydra.sweeper.params`` for
those keys. The overrides are part of a run's configuration, so they change
the config hash in its folder name (``runs/<group>/<model>/<label>-<hash>``);
``with_smoke_hashes`` points a README path at the run an earlier command made
that differs only in that hash.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cifar_root

README = ROOT / "README.md"

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
    "pip install": "installs packages: .ci/run runs this install itself before the tests",
    "python -m pytest": "the test suite itself, of which this test is a part",
    "tensorboard": "a server that runs until stopped: tests/test_tensorboard.py starts it and checks its HTTP API",
    "bash bench/gpu.sh": "needs a CUDA GPU",
    "python -m bench.run sweep": (
        "two 4-job training sweeps timed on a quiet machine (minutes); threads per side-by-side job are "
        "tested in tests/test_fast_paths.py::test_threads_per_job"
    ),
    "python -m bench.run step --compile-all": (
        "torch.compile of every encoding (minutes); `python -m bench.run step rope` is replayed at --quick"
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
    "python train.py data=shapes": [*TRAIN_SMOKE, "data.num_test=256", "data.val_size=128", "eval.resolutions=[24]"],
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
    "python train.py -m experiment=compare_cifar_full": [
        *TRAIN_SMOKE,
        "encoding=none,rope_2d",
        "seed=0",
        "data.test_subset=500",
        "eval.resolutions=[32,48]",
        "eval.test_subset=200",
    ],
    "python train.py -m experiment=compare_sequence": [
        *TRAIN_SMOKE,
        "encoding=rope_1d,alibi",
        "seed=0",
        "eval.lengths=[32,128]",
    ],
    "python -m vitpos.compare": [],
    "python -m vitpos.viz": [],
    "python -m vitpos.extrapolate": [],
    "python -m vitpos.extrapolate ckpt=runs/shapes/": ["resolutions=[24,32]", "data.num_test=256"],
    "python -m vitpos.extrapolate ckpt=runs/compare_cifar_quick/": ["resolutions=[32,48]", "data.test_subset=500"],
    "python -m vitpos.extrapolate ckpt=runs/compare_sequence/": ["lengths=[32,128]"],
    "OMP_NUM_THREADS=1 python bench/bench_rope.py": ["--batch", "2", "--tokens", "16"],
    "OMP_NUM_THREADS=1 python bench/bench_vit.py": ["--batch", "8", "--encodings", "none,rope_2d"],
    "python -m bench.run": ["--quick"],
    "python -m bench.run --quick": ["rope"],  # one part: all of them take minutes even at --quick
}

# What the replay directory holds besides the command outputs (links made below).
LINKED = ("train.py", "configs", "bench")
# Folders the commands write without naming them, each one the README explains.
EXPECTED = {
    "data": "the README's data step (unpack-cifar10.sh data) and the decoded-data cache",
    "runs": "every run folder (run.root)",
    "multirun": "Hydra's sweep folder for -m, read by `vitpos.compare --multirun multirun/`",
}
TIMEOUT_S = 900  # per command; a hang fails the test instead of blocking CI


def readme_commands(text: str) -> list[str]:
    """Every command in the ```bash blocks, in order, comments dropped,
    re-quoted by ``shlex.join`` (so ``'a=[1,2]'`` stays one word)."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def _longest_prefix(command: str, table: dict) -> str | None:
    """The longest key of ``table`` that starts ``command`` at a word boundary
    (a key ending in "/" matches any path below it)."""
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
    commands = readme_commands(README.read_text())
    assert len(commands) >= 5, f"found only {commands} in README's ```bash blocks: did the parser break?"
    uncovered = [c for c in commands if classify(c) is None]
    assert not uncovered, (
        "README commands neither replayed nor skipped; add each to RUNNERS (with smoke overrides) "
        f"or to SKIP (with the reason) in {Path(__file__).name}:\n  " + "\n  ".join(uncovered)
    )


def test_parser_keeps_quoted_words_and_drops_comments():
    text = "```bash\npython train.py 'encoding.parts=[a,b]' x=1   # a comment\n# only a comment\n```\n"
    assert readme_commands(text) == ["python train.py 'encoding.parts=[a,b]' x=1"]
    assert classify("python train.py data=shapes x=1") == ("run", RUNNERS["python train.py data=shapes"])
    assert classify("pip install -e .")[0] == "skip"
    assert classify("rm -rf runs") is None


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


def replay_dir(tmp_path: Path, cifar: Path) -> Path:
    """A working directory shaped like a clone after the README's data step."""
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    work = tmp_path / "repo"
    (work / "data").mkdir(parents=True)
    (work / "data" / "cifar10").symlink_to(cifar)
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    return work


@pytest.mark.slow
def test_readme_commands_run_in_order_at_smoke_scale(tmp_path):
    cifar = cifar_root()
    if cifar is None:
        pytest.skip("needs the CIFAR-10 copy: run `bash ../shared/datasets/unpack-cifar10.sh data`")
    commands = readme_commands(README.read_text())
    work = replay_dir(tmp_path, cifar)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    failures, ran, replayed = [], [], set()
    for i, command in enumerate(commands):
        kind, extra = classify(command) or ("uncovered", None)
        if kind != "run":
            continue
        if command.startswith("bash ../shared/") and not (ROOT.parent / "shared").is_dir():
            continue  # the workplace's shared folder is not beside this clone; data comes from VITPOS_CIFAR_ROOT
        full = with_smoke_hashes(command, work) + "".join(" " + shlex.quote(x) for x in extra)
        if full in replayed:  # a command the README repeats in a later section: it ran above, unchanged
            continue
        replayed.add(full)
        proc = subprocess.run(
            ["bash", "-c", full], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        out = proc.stdout + proc.stderr
        (tmp_path / f"{i:02d}.log").write_text(f"$ {full}\n{out}")
        ran.append(command)
        if proc.returncode != 0 or "Traceback" in out:
            failures.append(f"$ {full}\nexit {proc.returncode}\n{out[-3000:]}")
    allowed = set(LINKED) | set(EXPECTED) | output_folders(ran)
    leftovers = sorted(p.name for p in work.iterdir() if p.name not in allowed)
    if leftovers:
        failures.append(f"folders the README did not ask for, left in the working directory: {leftovers}")
    assert ran, "no README command was replayed"
    assert not failures, f"{len(failures)} problem(s) replaying the README:\n\n" + "\n\n".join(failures)
