"""`gpustack ARGS...` in a process of its own, forked from a server that has gpustack imported.

The kill -9 test (test_output_safety) kills renders part-way through their writing; a process
forked from an interpreter that already holds gpustack's modules reaches the writing about a
second sooner than a new `python -m gpustack`, which only spent that second importing. The
process is as separate as any: its own pid and session (killpg reaches it and its workers), its
own memory, its output thrown away.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess


def _main(args: list[str], cwd: str) -> None:
    os.setsid()  # its own session, as subprocess.Popen(start_new_session=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(devnull, descriptor)
    os.chdir(cwd)
    sys.argv = ["gpustack", *args]
    from gpustack.cli import main

    main()  # exits by SystemExit: the exit code is the process's exitcode


def context() -> ForkServerContext:
    """The fork server, preloaded with every gpustack module this process has imported."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [__name__, *sorted(name for name in sys.modules if name.startswith("gpustack"))]
    )
    return ctx


def start(*args: object, cwd: os.PathLike[str] | str) -> BaseProcess:
    """Start `gpustack ARGS...` (cwd `cwd`); its pid is the id of its own process group."""
    process = context().Process(target=_main, args=([str(arg) for arg in args], str(cwd)))
    process.start()
    return process
