"""Memory: the one estimate of an evaluation (``vitpos.eval_memory``) and the one rule for how much
of it may be planned, against the process's limits, not only the machine's RAM: ``ulimit -v``
(RLIMIT_AS) and the cgroup memory limit lower what a run may plan to use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import CONFIGS, ROOT
from hydra import compose, initialize_config_dir

import vitpos.eval_memory as eval_memory
import vitpos.runtime as runtime
from vitpos.errors import UserError
from vitpos.validate import validate

MICRO = {"model": {"patch_size": 4, "num_heads": 4, "dim": 64, "pool": "gap"},
         "data": {"eval_batch_size": 512, "img_size": 32, "num_test": 4000}}  # fmt: skip


def test_address_space_limit_lowers_the_budget(monkeypatch):
    monkeypatch.setattr(runtime, "address_space_limit", lambda: 3 << 30)
    monkeypatch.setattr(runtime, "cgroup_limit", lambda: (None, None))
    assert runtime.memory_limit() == 3 << 30


def test_cgroup_limit_lowers_the_budget_and_what_is_free(monkeypatch):
    monkeypatch.setattr(runtime, "address_space_limit", lambda: None)
    monkeypatch.setattr(runtime, "cgroup_limit", lambda: (2 << 30, 1 << 30))
    assert runtime.memory_limit() == 2 << 30
    assert runtime.available_memory("cpu") <= 1 << 30  # limit - usage


def test_the_estimate_counts_attention_activations_and_inputs():
    cfg = {**MICRO, "model": {**MICRO["model"], "pool": "cls"}, "data": {"eval_batch_size": 8}}
    need = eval_memory.evaluation_memory(cfg, "res", 32, num_test=100)
    assert (need.tokens, need.batch) == (8 * 8 + 1, 8)  # the class token counts with pool=cls
    assert need.scaled == 3 * 8 * 4 * 65**2 * 4 + 8 * 8 * 65 * 64 * 4  # logits, softmax, bias + one block
    assert need.inputs == 2 * 100 * 3 * 32 * 32 * 4
    few = eval_memory.evaluation_memory(cfg, "res", 32, num_test=3)
    assert few.batch == 3  # a batch is never larger than the test set
    seq = eval_memory.evaluation_memory({**cfg, "model": {"num_heads": 2, "dim": 32}}, "len", 100, num_test=10)
    assert (seq.tokens, seq.inputs) == (100, 10 * 100 * 8)


def test_the_batch_that_fits_is_the_largest_that_fits():
    need = eval_memory.evaluation_memory(MICRO, "res", 96, num_test=4000)
    allowed = need.total / 3
    fit = need.batch_that_fits(allowed)
    per_item = need.scaled / need.batch
    assert 1 <= fit < need.batch
    assert need.inputs + fit * per_item <= allowed < need.inputs + (fit + 1) * per_item
    assert need.batch_that_fits(need.inputs) == 0  # the inputs alone fill it: no batch fits


def test_one_rule_refuses_the_first_size_too_large_naming_its_option(monkeypatch):
    need = eval_memory.evaluation_memory(MICRO, "res", 64, num_test=4000).total
    free = need / eval_memory.MEMORY_FRACTION * 1.01  # 64 px just fits, 96 px does not
    monkeypatch.setattr(eval_memory, "available_memory", lambda device: free)
    sizes = [("data.img_size", 32), ("eval.resolutions", 64), ("eval.resolutions", 96)]
    problem = eval_memory.memory_problem(MICRO, "res", sizes, num_test=4000)
    assert isinstance(problem, UserError) and problem.option == "eval.resolutions"
    assert str(problem).startswith("eval.resolutions: 96 is refused: at 576 tokens an evaluation needs about ")
    assert "(attention of a batch of 512, data.eval_batch_size), more than 80% of the" in str(problem)
    assert "GiB free for this process (RAM, ulimit -v, cgroup limit)" in str(problem)
    assert "(use smaller sizes; data.eval_batch_size=" in str(problem) and "would fit)" in str(problem)
    assert eval_memory.memory_problem(MICRO, "res", sizes[:2], num_test=4000) is None
    on_gpu = eval_memory.memory_problem(MICRO, "res", sizes, num_test=4000, device="cuda:1")
    assert "GiB free on cuda:1" in str(on_gpu)


def test_a_run_is_checked_at_its_training_size_and_every_eval_size(monkeypatch):
    monkeypatch.setattr(eval_memory, "available_memory", lambda device: 2**20)  # 1 MiB: nothing fits
    image = {**MICRO, "eval": {"resolutions": [16]}}
    assert eval_memory.run_memory_problem(image, "res", None).option == "data.img_size"
    sequence = {"model": {"num_heads": 2, "dim": 32},
                "data": {"train_len": 64, "eval_batch_size": 8, "num_length_test": 500},
                "eval": {"lengths": [128]}}  # fmt: skip
    assert eval_memory.run_memory_problem(sequence, "len", None).option == "data.train_len"
    monkeypatch.setattr(eval_memory, "available_memory", lambda device: 2**50)  # everything fits
    assert eval_memory.run_memory_problem(image, "res", None) is None


def test_a_test_subset_lowers_the_inputs_counted(monkeypatch):
    seen, real = [], eval_memory.evaluation_memory

    def spy(cfg, kind, size, num_test):
        seen.append(num_test)
        return real(cfg, kind, size, num_test)

    monkeypatch.setattr(eval_memory, "evaluation_memory", spy)
    eval_memory.run_memory_problem({**MICRO, "data": {**MICRO["data"], "test_subset": 100}}, "res", 4000)
    eval_memory.run_memory_problem(MICRO, "res", 4000)
    assert seen == [100, 4000]


@pytest.mark.slow
def test_the_config_check_refuses_what_ulimit_forbids(tmp_path):
    """Through the command line, under `ulimit -v`: an evaluation size that fits the memory free on this
    machine but not the process's address space is refused up front, naming the option and the limit."""
    if sys.platform != "linux":
        pytest.skip("RLIMIT_AS semantics tested on Linux only")
    import resource

    limit = 12 << 30  # enough to import torch
    # sizes shapes can draw at 32 px: whole pixels in each of its 8x8 cells (vitpos/data/shapes.py)
    needs = {s: eval_memory.evaluation_memory(MICRO, "res", s, 4000).total for s in range(32, 400, 8)}
    size = min(s for s, need in needs.items() if need > eval_memory.MEMORY_FRACTION * limit)  # refused under 12 GiB
    need = needs[size]
    if need > 0.9 * eval_memory.MEMORY_FRACTION * runtime.available_memory("cpu"):
        pytest.skip(f"this machine has too little free memory ({need / 2**30:.1f} GiB needed) to tell it from ulimit")
    args = ["data=shapes", "model=vit_micro", f"eval.resolutions=[32,{size}]", f"run.root={tmp_path / 'R'}"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        validate(compose("train", overrides=args))  # accepted without the ulimit: no error
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"error: eval.resolutions: {size} is refused" in proc.stderr, proc.stderr
    assert "GiB free for this process (RAM, ulimit -v, cgroup limit)" in proc.stderr, proc.stderr
    free = float(proc.stderr.split("% of the ")[1].split(" GiB")[0])
    assert free <= 12, proc.stderr  # what ulimit -v leaves, not the machine's RAM
