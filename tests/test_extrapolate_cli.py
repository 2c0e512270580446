"""``python -m vitpos.extrapolate`` on real checkpoints: images and sequences in one call each; ``ckpt=``
patterns expanded by the tool."""

import csv
import json
from pathlib import Path

import pytest
from ckpt_factory import IMAGE as FAKE_IMAGE
from ckpt_factory import SEQUENCE as FAKE_SEQUENCE
from ckpt_factory import make_checkpoint
from conftest import CONFIGS, compose_train
from hydra import compose, initialize_config_dir

from vitpos.errors import UserError
from vitpos.extrapolate import checkpoints as extrapolate_cli
from vitpos.extrapolate.checkpoints import main
from vitpos.run.identity import TEST_SUBSET, next_commands
from vitpos.train import train

QUIET = ["trainer.max_epochs=1", "task.pictures=false", "trainer.enable_progress_bar=false"]
IMAGES = ["data=shapes", "data.num_train=300", "data.num_test=64", "data.val_size=64", "model=vit_micro",
          "eval.resolutions=[]"]  # fmt: skip
SEQUENCES = ["task=sequence", "data.num_train=200", "data.num_val=32", "data.num_test=32",
             "data.num_length_test=16", "eval.lengths=[]"]  # fmt: skip


def run(tmp_path, *overrides):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        train(compose("train", overrides=[f"run.root={tmp_path}", *QUIET, *overrides]))


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_several_image_checkpoints_in_one_table_and_plot(tmp_path, capsys):
    run(tmp_path, "encoding=rope_2d", *IMAGES)
    run(tmp_path, "encoding=learned_1d", *IMAGES)
    out = tmp_path / "report"
    main([f"ckpt={tmp_path}/shapes", "resolutions=[16,32,48]", "strategies=all", f"out={out}", "device=cpu"])
    rows = read(out / "extrapolation.csv")
    runs = {r["run"] for r in rows}  # run folders relative to ckpt=: [<model>/]<label>[-<hash>]/seed0
    rope = next(r for r in runs if "rope_2d" in r)
    assert len(runs) == 2 and any("learned_1d" in r for r in runs) and rope.endswith("/seed0")
    assert {r["strategy"] for r in rows if r["run"] == rope} == {
        "extrapolate", "interpolate", "ntk", "dynamic", "yarn"}  # fmt: skip
    assert {int(r["size"]) for r in rows} == {16, 32, 48}
    at32 = {float(r["acc"]) for r in rows if r["run"] == rope and r["size"] == "32"}
    assert len(at32) == 1  # every strategy is the identity at the training resolution
    assert (out / "extrapolation.png").stat().st_size > 0
    assert rope in capsys.readouterr().out


def test_sequence_checkpoint_by_length(tmp_path):
    run(tmp_path, "encoding=alibi", *SEQUENCES)
    out = tmp_path / "report"
    (ckpt,) = (tmp_path / "seq_copy").rglob("last.ckpt")
    assert main([f"ckpt={ckpt}", "lengths=[32,128]", f"out={out}"]) == 0
    rows = read(out / "extrapolation.csv")
    assert [(r["kind"], r["size"]) for r in rows] == [("len", "32"), ("len", "128")]


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    """Untrained image and sequence checkpoints (no training: the CLI's plumbing is under test)."""
    root = tmp_path_factory.mktemp("fakes")
    return (make_checkpoint(root / "images" / "rope_2d" / "seed0", "encoding=rope_2d", *FAKE_IMAGE),
            make_checkpoint(root / "seqs" / "alibi" / "seed0", "encoding=alibi", *FAKE_SEQUENCE))  # fmt: skip


def test_options_of_the_other_task_are_refused(fakes, tmp_path, capsys):
    image, sequence = fakes
    assert main([f"ckpt={sequence}", "resolutions=[16,32]", f"out={tmp_path}", "device=cpu"]) == 1
    assert "resolutions= does not apply to a sequence checkpoint; pass lengths=" in capsys.readouterr().err
    assert main([f"ckpt={image}", "lengths=[32]", f"out={tmp_path}", "device=cpu"]) == 1
    assert "lengths= does not apply to an image checkpoint; pass resolutions=" in capsys.readouterr().err
    assert not (tmp_path / "extrapolation.csv").exists()


@pytest.mark.parametrize("which, option", [(0, "resolutions=[16,4096]"), (1, "lengths=[32,100000]")])
def test_sizes_beyond_memory_are_refused_up_front(fakes, tmp_path, capsys, monkeypatch, which, option):
    monkeypatch.setattr(extrapolate_cli, "evaluate_sizes", pytest.fail)  # nothing may be evaluated
    assert main([f"ckpt={fakes[which]}", option, f"out={tmp_path}", "device=cpu"]) == 1
    err = capsys.readouterr().err
    assert f"{option.split('=')[0]}: {option.split(',')[1][:-1]} is refused" in err and "GiB" in err
    assert "data.eval_batch_size" in err


def test_a_failing_size_keeps_what_was_computed(fakes, tmp_path, capsys, monkeypatch):
    """Results are on disk before the next size runs; a size that fails is listed, the rest go on."""
    real, out = extrapolate_cli.evaluate_sizes, tmp_path / "out"

    def evaluate(module, datamodule, sizes, *args, **kw):
        if sizes == [24]:
            assert {r["size"] for r in read(out / "extrapolation.csv")} == {"16"}  # written already
            raise RuntimeError("DefaultCPUAllocator: not enough memory")
        return real(module, datamodule, sizes, *args, **kw)

    monkeypatch.setattr(extrapolate_cli, "evaluate_sizes", evaluate)
    code = main([f"ckpt={fakes[0]}", "resolutions=[16,24,32]", "strategies=default", f"out={out}", "device=cpu"])
    assert code == 1
    assert [r["size"] for r in read(out / "extrapolation.csv")] == ["16", "32"]
    assert "resolutions=24: RuntimeError: DefaultCPUAllocator: not enough memory" in capsys.readouterr().err
    assert (out / "extrapolation.png").is_file()


def test_a_corrupt_checkpoint_in_a_folder_does_not_stop_the_others(fakes, tmp_path, capsys):
    image, _ = fakes
    bad = tmp_path / "runs" / "bad" / "seed0" / "checkpoints" / "last.ckpt"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(image.read_bytes()[:5000])
    good = tmp_path / "runs" / "good" / "seed0" / "checkpoints" / "last.ckpt"
    good.parent.mkdir(parents=True)
    good.write_bytes(image.read_bytes())
    out = tmp_path / "out"
    assert main([f"ckpt={tmp_path / 'runs'}", "resolutions=[16]", "strategies=default", f"out={out}",
                 "device=cpu"]) == 1  # fmt: skip
    assert [r["run"] for r in read(out / "extrapolation.csv")] == ["good/seed0"]
    err = capsys.readouterr().err
    assert "1 failed" in err and f"ckpt={bad}: not a readable checkpoint" in err


def test_a_glob_pattern_in_ckpt_is_expanded_by_the_tool(fakes, tmp_path, capsys):
    """bash does not expand patterns inside key=value: the tool does; the progress bar names the size."""
    image, _ = fakes
    pattern = str(image).replace("rope_2d", "rope_*")
    out = tmp_path / "out"
    assert main([f"ckpt={pattern}", "resolutions=[16]", "strategies=[extrapolate,ntk]", f"out={out}",
                 "device=cpu", "data.eval_batch_size=8"]) == 0  # fmt: skip
    rows = read(out / "extrapolation.csv")
    assert {(r["run"], r["strategy"]) for r in rows} == {("rope_2d/seed0", "extrapolate"), ("rope_2d/seed0", "ntk")}
    err = capsys.readouterr().err
    assert "test at resolution 16 (ntk)" in err


def test_a_glob_pattern_matching_nothing_is_refused(fakes, tmp_path):
    image, _ = fakes
    pattern = str(image).replace("rope_2d", "alibi_*")
    with pytest.raises(UserError, match=r"^ckpt=.*alibi_\*.*: no file or folder matches this pattern"):
        main([f"ckpt={pattern}", f"out={tmp_path}"])
    assert list(tmp_path.iterdir()) == []


def test_one_strategy_by_name_and_repeated_ckpt(fakes, tmp_path):
    image, _ = fakes
    out = tmp_path / "out"
    assert main([f"ckpt={image}", f"ckpt={image.parent}", "resolutions=16", "strategies=ntk", f"out={out}",
                 "device=cpu"]) == 0  # fmt: skip
    rows = read(out / "extrapolation.csv")
    assert [(r["strategy"], r["size"]) for r in rows] == [("ntk", "16")]  # the same checkpoint twice: once


def test_one_checkpoint_search_for_every_tool(fakes, tmp_path):
    """``find_checkpoints``: patterns expanded, folders searched for last.ckpt, each checkpoint once, in order."""
    from vitpos.run.checkpoint import find_checkpoints

    image, sequence = fakes
    runs = image.parents[3]  # .../images: holds rope_2d/seed0/checkpoints/last.ckpt
    found = find_checkpoints([str(sequence), str(runs), str(image).replace("rope_2d", "rope_*")])
    assert [(hit.path, hit.root) for hit in found] == [(sequence, None), (image, runs)]


@pytest.mark.parametrize("tool", ["extrapolate", "viz"])
def test_both_tools_refuse_a_path_without_checkpoints_alike(tmp_path, tool):
    from vitpos.viz.__main__ import main as viz_main

    run_tool = {"extrapolate": main, "viz": viz_main}[tool]
    (tmp_path / "empty").mkdir()
    fix = r" \(pass a .ckpt file, a runs folder or a glob pattern\)$"
    none = "no last.ckpt or best-epoch<N>.ckpt in this folder"
    with pytest.raises(UserError, match=rf"^ckpt={tmp_path}/empty: {none}{fix}"):
        run_tool([f"ckpt={tmp_path / 'empty'}", f"out={tmp_path / 'out'}"])
    with pytest.raises(UserError, match=rf"^ckpt={tmp_path}/missing.ckpt: no such file or folder{fix}"):
        run_tool([f"ckpt={tmp_path / 'missing.ckpt'}", f"out={tmp_path / 'out'}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_the_tool_scores_the_test_images_training_scored(tmp_path, capsys, monkeypatch):
    """The printed ``next:`` command gives the numbers training printed, on the same seeded images
    (the run's eval.test_subset, named in the command as it is not the default); ``test_subset=N``
    and ``test_subset=null`` change how many images each size scores."""
    from vitpos.extrapolate import evaluate

    run(tmp_path, "encoding=rope_2d", "data=shapes", "data.num_train=300", "data.num_test=120",
        "data.val_size=64", "model=vit_micro", "eval.resolutions=[16,48]", "eval.test_subset=50",
        "++trainer.limit_train_batches=2")  # fmt: skip
    (printed,) = [line.split() for line in capsys.readouterr().out.splitlines() if "-m vitpos.extrapolate" in line]
    assert "test_subset=50" in printed
    (status,) = tmp_path.rglob("metrics.json")
    metrics = json.loads(status.read_text())["metrics"]
    scored, real = [], evaluate.score_at
    monkeypatch.setattr(evaluate, "score_at", lambda *a: scored.append(real(*a)) or scored[-1])

    def tool(*extra):
        scored.clear()
        args = [w for w in printed[3:] if not w.startswith(("test_subset=", "out="))]
        assert main([*args, *extra, "strategies=default", "device=cpu", f"out={tmp_path / 'out'}"]) == 0
        rows = read(tmp_path / "out" / "extrapolation.csv")
        assert [int(r["test_images"]) for r in rows] == [n for _, _, n in scored]  # the column says what ran
        return rows

    default = tool()  # the run's own eval.test_subset
    assert [int(r["test_images"]) for r in default] == [50, 50]
    for row in default:
        assert float(row["acc"]) == pytest.approx(metrics[f"test/acc@res{row['size']}"], abs=1e-9)
    assert [int(r["test_images"]) for r in tool("test_subset=20")] == [20, 20]
    assert [int(r["test_images"]) for r in tool("test_subset=null")] == [120, 120]
    assert tool("test_subset=50") == default


def test_help_lists_test_subset_and_a_bad_one_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "test_subset=INT|null" in capsys.readouterr().out
    with pytest.raises(UserError, match=r"^test_subset: must be a positive integer or null, got 0"):
        main([f"ckpt={tmp_path / 'missing.ckpt'}", "test_subset=0", f"out={tmp_path / 'out'}"])


def test_the_printed_command_names_a_test_subset_other_than_the_default():
    assert compose_train("data=shapes").eval.test_subset == TEST_SUBSET  # the config's default
    folder = Path("runs/shapes/vit_cpu/rope_2d-0a1b2c/seed0")

    def tool_line(*subset) -> str:
        (line,) = [x for x in next_commands(folder, "classification", None, None, *subset).splitlines()
                   if "-m vitpos.extrapolate" in x]  # fmt: skip
        return line

    assert "test_subset" not in tool_line() and "test_subset" not in tool_line(TEST_SUBSET)
    assert " test_subset=50 " in tool_line(50) and " test_subset=null " in tool_line(None)
