"""The `gpustack` command. Each subcommand lives in `gpustack/commands/<name>.py`, and
`gpustack/commands/root.py` puts them together (`ROOT`), parsed by argparse
(`gpustack/commands/declared.py`).

Exit codes: 0 success, 1 findings (invalid, stale, different), 2 usage or config error.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from gpustack import tune_gc

__all__ = ["app", "main", "run"]


def run(arguments: list[str]) -> int:
    """`gpustack ARGUMENTS`: its exit code."""
    from gpustack.commands import declared
    from gpustack.commands.root import ROOT

    return declared.main(ROOT, arguments)


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
