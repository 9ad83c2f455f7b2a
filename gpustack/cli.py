"""The `gpustack` command: typer's command line (`gpustack/commands/root.py`), one module per
command in `gpustack/commands/`.

Exit codes: 0 success, 1 findings (invalid, stale, different), 2 usage or config error.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from gpustack import tune_gc

__all__ = ["app", "main", "run"]


def run(arguments: list[str]) -> int:
    """`gpustack ARGUMENTS`: its exit code. typer prints help, --version and every mistake on
    the command line (exit 2); a UserError is printed as `error: file:line:col: field:
    message` and is exit 2 (with --debug it is raised, for its traceback)."""
    from gpustack.commands import common, root
    from gpustack.errors import UserError

    session = common.Session()
    try:
        root.command().main(arguments, prog_name="gpustack", obj=session)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    except UserError as problem:
        if session.debug:
            raise
        for each in problem.every():
            common.error(str(each))
        return 2
    return 0


def app(arguments: list[str] | None = None) -> NoReturn:
    """`gpustack ARGUMENTS` (default: the process's own), ending the process with its exit code."""
    sys.exit(run(sys.argv[1:] if arguments is None else list(arguments)))


def main() -> None:
    tune_gc()
    # No pydantic plugin takes part in gpustack's own validation, so the program spares pydantic
    # the search for them: every installed distribution's entry points, read through
    # importlib.metadata on the first validation (pydantic v2.14, pydantic/plugin/_loader.py
    # `get_plugins`, which PYDANTIC_DISABLE_PLUGINS=__all__ turns off). A value the user set is
    # kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        code = run(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:  # a closed pipe (`| head`) ends the run quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    sys.exit(code)
