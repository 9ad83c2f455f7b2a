"""Errors a user can act on: each names where the problem is and, when it can, how to fix it."""

from __future__ import annotations

import difflib
import functools
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """A place in a file: 1-based line and column, as editors and compilers print them."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        # The file's name on one line: a pull request names its files, and a line break in a
        # name would print a line of its own (`error: ...`) in the CI log.
        file = one_line(self.file)
        if self.line:
            return f"{file}:{self.line}:{self.column}"
        return file


class UserError(Exception):
    """A mistake in the user's input. The CLI prints it without a traceback and exits 2."""

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        field: str | None = None,
        hint: str | None = None,
        also: tuple[UserError, ...] = (),
        cluster_config: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.field = field
        self.hint = hint
        # Further mistakes found in the same pass (a config with several errors shows them all).
        self.also = also
        # The cluster config whose loading met the mistake, when the mistake is in another file
        # (a base it extends, a profile) or in `--set`: a base shared by a fleet is wrong for
        # some of its clusters only, and the message must say for which.
        self.cluster_config = cluster_config

    def __reduce__(self) -> tuple[type[UserError], tuple[object, ...]]:
        # Keeps location, field, hint and the other errors when a fleet's worker reports them.
        return (
            UserError,
            (
                self.message,
                self.location,
                self.field,
                self.hint,
                self.also,
                self.cluster_config,
            ),
        )

    def every(self) -> tuple[UserError, ...]:
        """This error and the others found with it, one line each when printed."""
        return (self, *self.also)

    def __str__(self) -> str:
        parts = []
        if self.location:
            parts.append(f"{self.location}: ")
        if self.field:
            # One line too: a field path holds the keys a pull request wrote.
            parts.append("".join(ch if ch.isprintable() else "?" for ch in self.field) + ": ")
        parts.append(self.message)
        if self.hint:
            parts.append(f" ({self.hint})")
        if self.cluster_config:
            parts.append(f" [loading {self.cluster_config}]")
        return one_line("".join(parts))


def one_line(text: str) -> str:
    """`text` with each character that is not printable (a line break, an escape, a bidi
    control) as `?`: a message names files and values a pull request chooses, and a line break
    in one would print a line of its own in the CI log (a `::error::` line GitHub Actions reads
    as a command), an escape would rewrite the terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


# Folders named otherwise, as (absolute folder, label): while `diff --git-ref` reads a revision
# into a temporary folder, its files are shown as git names them (`REF:path`), never by that folder;
# so is a path that leaves it for the private folder holding it (`REF:../base.yaml`).
shown_as: list[tuple[str, str]] = []


def display_path(path: Path | str) -> str:
    """A path as the user would type it: relative to the working directory when it is below it."""
    for folder, label in shown_as:
        absolute = os.path.abspath(path)
        if absolute.startswith(f"{os.path.dirname(folder)}/"):
            return f"{label}:{os.path.relpath(absolute, folder)}"
    return _display_path(str(path), os.getcwd())


@functools.cache
def _display_path(path: str, cwd: str) -> str:
    # Cached: a fleet names the same few thousand files many times over.
    # The folder resolved, the name kept: a symbolic link is shown as itself, not its target.
    folder, name = os.path.split(os.path.abspath(os.path.join(cwd, path)))
    try:
        return str((_real_folder(folder) / name).relative_to(_real_folder(cwd)))
    except ValueError:
        return path


def real_path(path: Path | str) -> Path:
    """`Path(path).resolve()`, looked up once per path (a fleet asks for the same files many
    times over: discovery, each config's `extends:` chain, rendering)."""
    return _real_path(str(path), os.getcwd())


@functools.cache
def _real_path(path: str, cwd: str) -> Path:
    return Path(cwd, path).resolve()


@functools.cache
def _real_folder(folder: str) -> Path:
    # Once per folder: a fleet's configs share a few folders.
    return Path(folder).resolve()


def closest(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The valid name a typo most likely meant, or None when nothing is close."""
    others = sorted(choice for choice in choices if choice != word)  # never the word itself
    matches = difflib.get_close_matches(word, others, n=1, cutoff=0.6)
    if not matches:
        lowered = {choice.lower(): choice for choice in others}
        return lowered.get(word.lower())
    return matches[0]


def describe(value: object) -> str:
    """A YAML value as a user would name it in a sentence: "a list", "'four'", "true"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    match = closest(word, choices)
    return f"did you mean '{match}'?" if match else None
