"""What every command shares: turning user errors into a message and exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from gpustack.errors import UserError

DEBUG = False
F = TypeVar("F", bound=Callable[..., Any])


def error(message: str) -> None:
    typer.echo(f"error: {message}", err=True)


def warning(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def handles_user_errors(function: F) -> F:
    """Print a UserError as `error: file:line:col: field: message` and exit 2, no traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except UserError as problem:
            if DEBUG:
                raise
            error(str(problem))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
