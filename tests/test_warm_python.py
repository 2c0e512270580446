"""The warm interpreter of the command-line tests (tests/warm_python.py) runs a command as a fresh
``python`` would: arguments, working directory, environment, streams and exit status."""

import os
import subprocess
import sys

import pytest
import warm_python


@pytest.fixture(scope="module")
def light_env():
    """A server that preloads only ``json`` (the mechanism, not the minutes)."""
    with warm_python.started(dict(os.environ), preload=("json",)) as env:
        assert warm_python.SOCKET_ENV in env, "the warm server did not start"
        yield env


def python(env, cwd, *args, extra_env=None):
    return subprocess.run(
        ["python", *args], cwd=cwd, env={**env, **(extra_env or {})}, capture_output=True, text=True, timeout=120
    )


def test_a_script_runs_as_main_with_its_folder_first_on_the_path(light_env, tmp_path):
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "helper.py").write_text("NAME = 'helper'\n")
    script = tmp_path / "tool" / "main.py"
    script.write_text(
        "import os, sys, helper\n"
        "print(__name__, sys.argv[1:], helper.NAME, os.getcwd(), os.environ['COLOUR'], os.getpid())\n"
        "sys.exit(3)\n"
    )
    proc = python(light_env, tmp_path, str(script), "a", "b c", extra_env={"COLOUR": "red"})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith(f"__main__ ['a', 'b c'] helper {tmp_path} red "), proc.stdout
    again = python(light_env, tmp_path, str(script), extra_env={"COLOUR": "blue"})
    assert again.stdout.split()[-1] != proc.stdout.split()[-1], "each command runs in a process of its own"
    assert "blue" in again.stdout


def test_module_code_errors_and_signals_give_the_status_python_gives(light_env, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text("import sys\nprint(__name__, sys.argv[1:])\nsys.exit('bad input')\n")
    proc = python(light_env, tmp_path, "-m", "pkg.tool", "x")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "__main__ ['x']\n", "bad input\n")
    proc = python(light_env, tmp_path, "-c", "raise ValueError('boom')")
    assert proc.returncode == 1 and "ValueError: boom" in proc.stderr and "Traceback" in proc.stderr
    proc = python(light_env, tmp_path, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert proc.returncode == 137  # 128 + SIGKILL, as bash reports it
    proc = python(light_env, tmp_path, "-c", "import atexit; atexit.register(print, 'at exit'); print('body')")
    assert (proc.returncode, proc.stdout) == (0, "body\nat exit\n")


def test_pythonpath_and_unbuffered_are_read_from_the_command(light_env, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "extra_mod.py").write_text("VALUE = 42\n")
    code = "import sys, extra_mod; print(extra_mod.VALUE); print('err', file=sys.stderr); print('out')"
    proc = subprocess.run(
        ["python", "-c", code],
        cwd=tmp_path,
        env={**light_env, "PYTHONPATH": str(tmp_path / "lib"), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert proc.stdout == "42\nerr\nout\n"  # in the order printed: stdout is not held back


def test_other_interpreter_flags_run_the_real_interpreter(light_env, tmp_path):
    proc = python(light_env, tmp_path, "-V")
    assert proc.returncode == 0 and proc.stdout.strip() == f"Python {sys.version.split()[0]}"
