"""The benchmark command's key=value options: parts as leading words, the row filters
(``shapes=``, ``encodings=``) refusing unknown names with the valid ones before any model is built;
the README's ``bench.run`` replays run the tables themselves."""

import pytest
import torch

from bench.run import BenchOptions, main
from vitpos.cli.options import parse_options
from vitpos.errors import UserError


def parse(*words):
    return parse_options(list(words), BenchOptions, prog="python -m bench.run")


def test_parts_and_options():
    opts = parse("step", "rope", "quick=true", "threads=2", "shapes=[vit_tiny,vit_micro]", "encodings=rope_2d")
    assert opts.parts == ["step", "rope"] and opts.quick is True and opts.threads == 2
    assert opts.shapes == ["vit_tiny", "vit_micro"] and opts.encodings == ["rope_2d"]
    assert parse("parts=[data]", "compile_all=true").parts == ["data"]
    assert parse().parts == [] and parse().quick is False


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["step", "quick=true", "shapes=[vit_big]"], "shapes: unknown vit_big (valid: vit_micro, vit_tiny"),
        (["step", "encodings=[learned_3d]"], "encodings: unknown learned_3d (valid: "),
        (["stpe"], "stpe: unknown part (did you mean step? valid: step, rope, data, eval, memory, sweep, gpu)"),
        (["--quick"], "--quick: expected key=value (write quick=true"),
        (["threads=many"], "threads: expected an integer, got 'many' (e.g. threads=4)"),
        (["threads=0"], "threads: 0 is not a thread count (give 1 or more"),
    ],
)
def test_bad_words_are_refused_before_anything_runs(words, message, capsys):
    with pytest.raises(UserError) as err:
        main(words)
    assert str(err.value).startswith(message), str(err.value)
    assert capsys.readouterr().out == ""  # not even the header: nothing ran


def test_the_export_table_times_one_thread_each_unless_told_and_refuses_fewer(monkeypatch):
    """onnxruntime's pool and torch's contend in one process: the table is timed at one thread each."""
    from bench import export

    monkeypatch.setattr(export, "table_keys", lambda *a: [])  # no rows: only the options and the threads
    monkeypatch.setattr(export, "render", lambda rows, note: "")
    before = torch.get_num_threads()
    try:
        assert export.main([]) == 0 and torch.get_num_threads() == 1
        assert export.main(["threads=2"]) == 0 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(UserError, match="threads: -1 is not a thread count"):
        export.main(["threads=-1"])
