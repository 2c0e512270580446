"""A warm ``python`` for the tests that run command lines: import the heavy modules once, fork a
fresh child per command.

The README replay (tests/test_readme.py) runs ~45 commands and tests/test_bad_input.py ~75. Each
replayed command used to spend about 6 CPU-seconds importing torch, Lightning (which imports
torchmetrics, which imports transformers when it is installed, as the dev extra does) and timm
before doing anything: about half of the replay's minutes. The ``warm_env`` fixture (tests/conftest.py) starts
one server per test process and gives the environment whose ``python`` is the shim below.

``python tests/warm_python.py SOCKET`` imports those modules (``PRELOAD``), prints ``ready`` and
listens on the Unix socket SOCKET. ``started`` puts a shim named ``python`` first on PATH
(``write_shim``); the shim sends the server its arguments, working directory, environment and
standard streams, and the server forks:

- a handler, which forks the runner, waits for it and sends its exit status back to the shim, which
  exits with it (a signal as ``128 + signal``, as bash reports it);
- the runner, which takes the shim's streams, directory and environment and runs the command as
  ``python`` would: ``python FILE`` as ``__main__`` with the file's folder first on ``sys.path``,
  ``-m MODULE`` with the working directory first, ``-c CODE``; it then waits for non-daemon threads
  and runs the ``atexit`` functions, as the interpreter does when it exits.

Every command still runs in a process of its own, started from the same state (the server only
imports; it never runs a model, so no OpenMP thread pool exists to be forked), so one command cannot
leak into the next. The runner does what a fresh interpreter does at start: it reseeds ``random``,
sets torch's threads from ``OMP_NUM_THREADS`` and reads ``PYTHONPATH`` and ``PYTHONUNBUFFERED`` from
the command's environment (other ``PYTHON*`` variables keep the server's values). Anything else
(other interpreter flags, no server) the shim hands to the real interpreter with ``os.execv``;
``VITPOS_COLD_PYTHON=1`` runs a fresh interpreter per command throughout.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import importlib
import json
import os
import random
import runpy
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback

# Imported once by the server (never a ``__main__`` module: runpy would warn that it is already
# imported); what they import in turn (torchmetrics, transformers, tensorboard) comes with them.
PRELOAD = (
    "torch",
    "torchvision",
    "timm",
    "lightning",
    "hydra",
    "omegaconf",
    "matplotlib.pyplot",
    "vitpos.train",
    "vitpos.validate",
    "vitpos.tasks.build",
    "vitpos.compare",
    "vitpos.extrapolate",
    "vitpos.viz",
)

SOCKET_ENV = "VITPOS_WARM_PYTHON"  # the shim's way to the server; unset: the shim runs the real python

SHIM = '''#!{real} -IS
"""`python` for the command-line tests: run this command in a child of the warm server (tests/warm_python.py)."""
import json, os, socket, struct, sys

REAL = {real!r}
argv = sys.argv[1:]
path = os.environ.get({env!r})
simple = bool(argv) and ((argv[0] in ("-m", "-c") and len(argv) > 1) or not argv[0].startswith("-"))
conn = socket.socket(socket.AF_UNIX) if path and simple else None
try:
    conn and conn.connect(path)
except OSError:
    conn = None
if conn is None:
    os.execv(REAL, [REAL, *argv])
body = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(conn, [struct.pack("!I", len(body))], [0, 1, 2])
conn.sendall(body)
reply = b""
while len(reply) < 4:
    chunk = conn.recv(4 - len(reply))
    if not chunk:
        sys.exit("warm python: the server closed the connection before the command ended")
    reply += chunk
code = struct.unpack("!i", reply)[0]
sys.exit(128 - code if code < 0 else code)
'''


def write_shim(folder, real: str = sys.executable):
    """Write the executable shim ``folder/python`` (the real interpreter ``real`` behind it); return its path."""
    path = os.path.join(str(folder), "python")
    with open(path, "w") as f:
        f.write(SHIM.format(real=real, env=SOCKET_ENV))
    os.chmod(path, 0o755)
    return path


@contextlib.contextmanager
def started(env: dict, preload=PRELOAD):
    """Start a server with the environment ``env``; yield ``env`` with ``python`` on its PATH being
    the shim (then the real interpreter's folder), and stop the server and every child it forked on
    exit. With ``VITPOS_COLD_PYTHON=1``, or when the server does not come up (then only slower),
    ``python`` on the PATH is the real interpreter."""
    env = dict(env, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}")
    if env.get("VITPOS_COLD_PYTHON") == "1":
        yield env
        return
    folder = tempfile.mkdtemp(prefix="vitpos-warm-")  # short: a Unix socket's path has ~100 bytes
    sock, log = os.path.join(folder, "python.sock"), os.path.join(folder, "server.log")
    with open(log, "w") as err:
        server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), sock, ",".join(preload)],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,  # its own process group: stopped with every child it forked
        )
    try:
        if select.select([server.stdout], [], [], 300)[0] and server.stdout.readline().strip() == "ready":
            write_shim(folder)
            env = dict(env, PATH=f"{folder}{os.pathsep}{env['PATH']}", **{SOCKET_ENV: sock})
        else:
            with open(log) as f:
                print(f"warm python did not start, running a fresh interpreter per command:\n{f.read()[-2000:]}")
        yield env
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def serve(path: str, preload=PRELOAD) -> None:
    """Import ``preload``, then fork a handler for every connection to the Unix socket ``path``."""
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = sys.path[1 + len(own) :]  # the search path without this file's folder and PYTHONPATH
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # a command that needs it fails in its child, as it would in a fresh python
            pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    print("ready", flush=True)
    sys.stderr.flush()
    parent = os.getppid()
    server.settimeout(5)
    while os.getppid() == parent:  # the test process that started it is gone: so is the server
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the handler waits for its runner
            _handle(conn, base_path)
        conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """The shim's request (argv, cwd, env) and its three standard streams."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    size = struct.unpack("!I", head)[0]
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the shim closed the connection mid-request")
        body += chunk
    return json.loads(body), fds


def _handle(conn: socket.socket, base_path: list[str]) -> None:
    """Fork the runner, wait for it, send its exit status (negative: the signal that ended it)."""
    code = 1
    try:
        request, fds = _receive(conn)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run(request, fds, base_path)
        for fd in fds:
            os.close(fd)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        try:
            conn.sendall(struct.pack("!i", code))
        finally:
            os._exit(0)


def _exit_code(exit: SystemExit) -> int:
    """The status ``sys.exit(x)`` gives a process: None 0, an int itself, anything else printed and 1."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=sys.stderr)
    return 1


def _run(request: dict, fds: list[int], base_path: list[str]) -> None:
    """Run the command in this (forked) process as ``python ARGV`` would, then exit with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    random.seed()  # a fresh interpreter seeds from the OS
    if os.environ.get("PYTHONUNBUFFERED"):  # read at start by a fresh interpreter
        sys.stdout.reconfigure(write_through=True)
        sys.stderr.reconfigure(write_through=True)
    extra = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [*extra, *base_path]
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))
    argv = request["argv"]
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]  # runpy sets argv[0] to the module's file
            sys.path[:] = [os.getcwd(), *base_path]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[:] = ["", *base_path]
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
        else:
            sys.argv = list(argv)
            sys.path[:] = [os.path.dirname(os.path.realpath(argv[0])), *base_path]
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit:
        code = _exit_code(exit)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:  # what the interpreter does on its way out: join non-daemon threads, then the atexit functions
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)


if __name__ == "__main__":
    serve(sys.argv[1], tuple(filter(None, sys.argv[2].split(","))) if len(sys.argv) > 2 else PRELOAD)
