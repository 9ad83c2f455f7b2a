"""What every command shares: turning user errors into a message and exit code 2."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import typer

from gpustack.errors import UserError

DEBUG = False
F = TypeVar("F", bound=Callable[..., Any])

# Options several commands share, declared once.
PROFILES_DIR: Any = typer.Option(
    None,
    "--profiles-dir",
    envvar="GPUSTACK_PROFILES_DIR",
    metavar="DIR",
    help="Folder of user profiles, searched before the built-in ones "
    "(default: $GPUSTACK_PROFILES_DIR).",
)
SET: Any = typer.Option(
    None,
    "--set",
    metavar="FIELD=VALUE",
    help="Override a config field, read as YAML and checked like the file "
    "(e.g. devicePlugin.sharing.replicas=8); repeatable, the last one wins.",
)

OUT: Any = typer.Option(
    Path("out"), "-o", "--out", metavar="DIR", help="Folder holding <name>/ per cluster."
)


class TextOrJson(str, Enum):
    """`--output` of the commands that print text or JSON."""

    text = "text"
    json = "json"


def error(message: str) -> None:
    typer.echo(f"error: {message}", err=True)


def warning(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


class ColorMode(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


COLOR: Any = typer.Option(
    ColorMode.auto,
    "--color",
    metavar="WHEN",
    help="Colour the text output: auto (on a terminal, unless NO_COLOR is set), always, never.",
)
QUIET: Any = typer.Option(False, "-q", "--quiet", help="Print nothing but warnings and errors.")


def use_color(mode: ColorMode) -> bool:
    if mode is ColorMode.auto:
        # https://no-color.org: a non-empty NO_COLOR turns colour off unless explicitly asked for.
        return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return mode is ColorMode.always


class Progress:
    """`label done/total` on one stderr line that rewrites itself, only on a terminal and only
    for runs long enough to need it; `finish` clears it before the summary."""

    SHOWN_FROM = 20  # clusters or folders: fewer finish before a reader would look

    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        self.total, self.label, self.done, self.shown = total, label, 0, False
        self.enabled = enabled and total >= self.SHOWN_FROM and sys.stderr.isatty()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.enabled:
            sys.stderr.write(f"\r{self.label} {self.done}/{self.total}")
            sys.stderr.flush()
            self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def note(message: str) -> None:
    typer.echo(f"note: {message}", err=True)


def configs(paths: list[Path] | None) -> list[Path | None]:
    """The configs a command reads (fleet.discover), saying so when it is the embedded example."""
    from gpustack import fleet

    found = fleet.discover(paths or [])
    if found == [None]:
        note(
            "no ./gpustack.yaml here: using the embedded example (kubeadm, cluster kubeadm-lab); "
            "`gpustack init` writes a config of your own"
        )
    return found


def handles_user_errors(function: F) -> F:
    """Print a UserError as `error: file:line:col: field: message` and exit 2, no traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except UserError as problem:
            if DEBUG:
                raise
            for each in problem.every():
                error(str(each))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
