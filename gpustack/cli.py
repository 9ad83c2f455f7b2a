"""The `gpustack` command. Each subcommand lives in `gpustack/commands/<name>.py`, and
`gpustack/commands/root.py` puts them together as a typer application (`app`).

Exit codes: 0 success, 1 findings (invalid, stale, different), 2 usage or config error.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gpustack import tune_gc
from gpustack.commands import COMPLETE_VARIABLE, GLOBAL_FLAGS, declared

__all__ = ["GLOBAL_FLAGS", "main"]  # and `app` (below)


def main() -> None:
    tune_gc()
    completing = COMPLETE_VARIABLE in os.environ
    try:
        code = None if completing else declared.main(sys.argv[1:])
    except BrokenPipeError:  # as click: a closed pipe (`| head`) ends the run quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    if code is not None:
        sys.exit(code)
    # Deferred: typer's application, for every other command line (start-up time).
    from gpustack.commands import completion, root

    if completing:
        completion.prepare()
    root.app(prog_name="gpustack", complete_var=completion.COMPLETE_VARIABLE)


def __getattr__(name: str) -> Any:
    """`app`, the typer application, loaded on first use (start-up time)."""
    if name == "app":
        from gpustack.commands.root import app  # deferred: start-up time

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
