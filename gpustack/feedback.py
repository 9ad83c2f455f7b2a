"""What a step of the library tells its user while it works, and how far it has got: the command
line prints both (`commands/common.py`). A step says things as they happen, not in its result, so
a note or warning it gives is still shown when a later refusal (a `UserError`) ends the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# A note or a warning, one line each; the command prints it on stderr with its prefix.
Say = Callable[[str], None]


def silent(message: str) -> None:
    """Say nothing: for a caller that prints no notes (`-q`) or none of this kind."""


class Progress(Protocol):
    """How far a long step has got: `advance` per item done, `finish` when the step ends."""

    def advance(self, count: int = 1) -> None: ...

    def finish(self) -> None: ...


# A step's progress of `total` items, by its label (`rendering`, `writing`, `checking`).
StartProgress = Callable[[int, str], Progress]


class NoProgress:
    """Progress nobody is shown."""

    def advance(self, count: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


def no_progress(total: int, label: str) -> Progress:
    return NoProgress()
