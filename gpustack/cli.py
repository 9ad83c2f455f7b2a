"""The `gpustack` command: typer's command line (`gpustack/commands/root.py`), one module per
command in `gpustack/commands/`.

Exit codes: 0 success, 1 findings (invalid, stale, different), 2 usage or config error.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from gpustack import tune_gc
from gpustack.commands import common, root
from gpustack.errors import UserError

__all__ = ["app", "main", "run"]


def run(arguments: list[str]) -> int:
    """`gpustack ARGUMENTS`: its exit code. typer prints help, --version and every mistake on
    the command line (exit 2); a UserError is printed as `error: file:line:col: field:
    message` and is exit 2 (with --debug it is raised, for its traceback)."""
    session = common.Session()
    try:
        root.command().main(files_as_files(arguments), prog_name="gpustack", obj=session)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    except UserError as problem:
        if session.debug:
            raise
        for each in problem.every():
            common.error(str(each))
        return 2
    return 0


def files_as_files(arguments: list[str]) -> list[str]:
    """`arguments` with every one that starts with `-` and is the name of a file or folder moved
    after a `--`, where it is read as a path. pre-commit appends the changed files' names to a
    hook's command line with no `--` before them (pre-commit/pre-commit#2896, closed as not its
    concern), so a file a pull request commits as `-ofake/x.yaml` would be read as `-o
    fake/x.yaml` and point `gpustack check` at an output folder the pull request made up; the
    hook would pass where CI fails. An option is never the name of a file that exists."""
    end = arguments.index("--") if "--" in arguments else len(arguments)
    named = [
        index
        for index, argument in enumerate(arguments[:end])
        if argument.startswith("-") and argument != "-" and os.path.lexists(argument)
    ]
    if not named:
        return arguments
    before = [argument for index, argument in enumerate(arguments[:end]) if index not in named]
    return [*before, "--", *(arguments[index] for index in named), *arguments[end + 1 :]]


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
