"""What a step of the library tells its user while it works, and how far it has got: the command
line prints both (`commands/common.py`). A step says things as they happen, not in its result, so
a note or warning it gives is still shown when a later refusal (a `UserError`) ends the run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# A note or a warning, one line each; the command prints it on stderr with its prefix.
Say = Callable[[str], None]


@dataclass(frozen=True)
class Messages:
    """Where a step's notes, warnings and errors go, one line each, as they are found."""

    note: Say
    warning: Say
    error: Say


def silent(message: str) -> None:
    """Say nothing: for a caller that prints no notes (`-q`) or none of this kind."""


class Progress(Protocol):
    """How far a long step has got: `advance` per item done, `finish` when the step ends."""

    def advance(self, count: int = 1) -> None: ...

    def finish(self) -> None: ...


# A step's progress of `total` items, by its label (`rendering`, `writing`, `checking`).
StartProgress = Callable[[int, str], Progress]


# Clusters a grouped message names without --verbose.
NAMED = 3


def grouped(messages: list[tuple[str, str]], verbose: bool = False) -> list[str]:
    """(cluster, message) pairs as one line per distinct message, in first-seen order: a
    message of one cluster as `cluster: message`, one of many once with the count and the first
    names (every name when `verbose`), so a fleet's repeated warning is one line, not hundreds."""
    clusters: dict[str, list[str]] = {}
    for cluster, message in messages:
        named = clusters.setdefault(message, [])
        if cluster not in named:
            named.append(cluster)
    lines = []
    for message, named in clusters.items():
        if len(named) == 1:
            lines.append(f"{named[0]}: {message}")
            continue
        shown = named if verbose else named[:NAMED]
        more = len(named) - len(shown)
        listed = ", ".join(shown) + (f" and {more} more; --verbose names them all" if more else "")
        lines.append(f"{message} [{len(named)} clusters: {listed}]")
    return lines
