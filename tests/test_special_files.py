"""What the bounded reader refuses is said as what it is: every refusal of `read_bounded` is an
UnreadableFile, which the readers of patch files, MIG configs, the entitlement PEM and bases
report as it is, never as a file that does not parse (tests/cases/bad/ holds the commands'
messages: patch-file-is-a-fifo, mig-config-file-is-a-broken-link...)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpustack.read.bounded import UnreadableFile, read_bounded


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _broken_link(path: Path) -> None:
    path.symlink_to(path.with_name("missing"))


def _too_large(path: Path) -> None:
    path.write_bytes(b"a: 1\n" * 10)


SPECIAL: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "is a named pipe (FIFO), expected a patch file"),
    "folder": (Path.mkdir, "is a folder, expected a patch file"),
    "broken link": (_broken_link, "file not found (a symbolic link to a missing file)"),
    "missing": (lambda path: None, "file not found"),
    "too large": (
        _too_large,
        "file has more than 20 bytes (20 bytes), the most a patch file may have",
    ),
}


@pytest.mark.parametrize("kind", SPECIAL)
def test_every_refusal_is_an_unreadable_file(tmp_path: Path, kind: str) -> None:
    make, message = SPECIAL[kind]
    path = tmp_path / "patch.yaml"
    make(path)
    with pytest.raises(UnreadableFile) as error:
        read_bounded(path, 20, "a patch file")
    assert error.value.message == message


def test_a_device_is_named_as_one() -> None:
    with pytest.raises(UnreadableFile) as error:
        read_bounded("/dev/null", what="a mig-parted config")
    assert error.value.message == "is a device, expected a mig-parted config"
