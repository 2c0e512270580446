"""The evaluation at other sizes says where its time went: one line after a single run's
evaluation, with the seconds of each size, on how many test images, and the options that trim
or skip it (a quick first look used to spend half its minutes there without a word)."""

import re

from conftest import EvalModule, small_vit

from vitpos.data.images import ImageDataModule
from vitpos.extrapolate import evaluate_module, evaluate_sizes
from vitpos.extrapolate.evaluate import timing_line


def shapes(num_test: int = 40) -> ImageDataModule:
    dm = ImageDataModule(name="shapes", img_size=16, num_train=64, val_size=16, num_test=num_test)
    dm.setup("test")
    return dm


def test_the_line_gives_each_size_its_seconds_and_the_subset(capsys):
    module = EvalModule(small_vit("sincos_2d", num_classes=4))
    eval_cfg = {"resolutions": [16, 24, [16, 32]], "strategies": "default", "test_subset": 10}
    results = evaluate_module(module, shapes(), eval_cfg, "res", progress=True)
    assert {"test/acc@res16", "test/acc@res24", "test/acc@res16x32"} <= set(results)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("other resolutions:")]
    assert len(lines) == 1, lines
    line = lines[0]
    assert "on 10 test images each" in line and "eval.test_subset=10" in line and "eval.resolutions=[]" in line
    assert re.search(r": res16 \d+\.\d s, res24 \d+\.\d s, res16x32 \d+\.\d s$", line), line


def test_the_whole_test_set_says_so_and_side_by_side_jobs_print_nothing(capsys):
    module = EvalModule(small_vit("rope_2d", num_classes=4))
    eval_cfg = {"resolutions": [16, 24], "strategies": "all", "test_subset": None}
    evaluate_module(module, shapes(), eval_cfg, "res", progress=True)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "on 40 test images each x 5 strategies (eval.test_subset=null: all of them;" in line, line
    evaluate_module(module, shapes(), eval_cfg, "res", progress=False)  # jobs side by side: no line
    assert "other resolutions" not in capsys.readouterr().out


def test_timings_sum_the_strategies_of_each_size():
    module = EvalModule(small_vit("rope_2d", num_classes=4))
    timings: dict = {}
    evaluate_sizes(module, shapes(), [16, 24], ["extrapolate", "ntk"], "res", progress=False, timings=timings)
    assert list(timings) == ["16", "24"]
    assert all(seconds > 0 and images == 2 * 40 for seconds, images in timings.values()), timings


def test_sequences_get_seconds_per_length_without_a_count():
    """A sequence scores tokens, and each length has another number of them: the line gives no count."""
    line = timing_line("len", {"32": (1.0, 100), "128": (2.5, 400)}, 1, {"lengths": [32, 128]})
    assert line == "other lengths: 3.5 s (none: eval.lengths=[]): len32 1.0 s, len128 2.5 s"
