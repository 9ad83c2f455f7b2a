"""`gpustack diff`: one config on two profiles, two configs, or a render against committed output.

Exit 0 when there is no difference, 1 when there is, 2 on a usage or config error.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpustack.commands.common import handles_user_errors, warning

if TYPE_CHECKING:
    from gpustack.config import Stack
    from gpustack.diff import Diff
    from gpustack.render import Rendering


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


class ColorMode(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


USAGE = (
    "give two CONFIGs to see what a config change does, --profile twice to compare one config "
    "on two platforms, or --against DIR to see what a render would change in committed output"
)


@handles_user_errors
def command(
    configs: list[Path] = typer.Argument(
        None,
        metavar="CONFIG",
        help="One config (default ./gpustack.yaml, else the embedded kubeadm example), or two.",
    ),
    profiles: list[str] = typer.Option(
        None,
        "--profile",
        metavar="NAME",
        help="Twice: compare the config on two profiles. Once: override platform.profile.",
    ),
    against: Path | None = typer.Option(
        None,
        "--against",
        metavar="DIR",
        help="Compare a render with the output committed in DIR/<metadata.name>/.",
    ),
    profiles_dir: Path | None = typer.Option(
        None, "--profiles-dir", help="Folder of user profiles, searched before the built-in ones."
    ),
    output: OutputFormat = typer.Option(
        OutputFormat.text, "--output", help="text (summary, then unified diff) or json."
    ),
    color: ColorMode = typer.Option(
        ColorMode.auto,
        "--color",
        help="Colour the text output: auto (on a terminal, unless NO_COLOR is set), always, never.",
    ),
) -> None:
    """Show what differs, per object (with the changed field paths), then as a unified diff."""
    from gpustack.diff import as_json, render_text

    difference = _compare(list(configs or []), list(profiles or []), against, profiles_dir)
    if output is OutputFormat.json:
        typer.echo(json.dumps(as_json(difference), indent=2, ensure_ascii=False))
    else:
        painted = _use_color(color)
        # click strips escape codes when stdout is no terminal unless told the colour is wanted.
        typer.echo(render_text(difference, painted), nl=False, color=painted)
    raise typer.Exit(0 if difference.is_empty else 1)


def _compare(
    configs: list[Path], profiles: list[str], against: Path | None, profiles_dir: Path | None
) -> Diff:
    from gpustack.config import load_stack
    from gpustack.diff import Diff
    from gpustack.errors import Location, UserError, display_path

    if len(profiles) > 2:
        raise UserError("--profile may be given at most twice", hint=USAGE)
    if len(profiles) == 2:
        if against is not None or len(configs) > 1:
            raise UserError("--profile twice compares one config on two profiles", hint=USAGE)
        path = configs[0] if configs else _default_config()
        first, second = (
            load_stack(path, name, profiles_dir, leave_out_inapplicable=True) for name in profiles
        )
        difference = _between(first, profiles[0], second, profiles[1])
        left_out = tuple(
            (side, field, why)
            for side, stack in zip(profiles, (first, second))
            for field, why in stack.left_out
        )
        return Diff(difference.old_label, difference.new_label, difference.changes, left_out)
    override = profiles[0] if profiles else None
    if against is not None:
        if len(configs) > 1:
            raise UserError("--against compares one config with its committed output", hint=USAGE)
        if not against.is_dir():
            raise UserError(
                "--against folder does not exist"
                if not against.exists()
                else "--against must be a folder",
                Location(display_path(against)),
                hint="give the folder `gpustack render -o` wrote, the one holding <metadata.name>/",
            )
        stack = load_stack(configs[0] if configs else _default_config(), override, profiles_dir)
        return _against_committed(stack, against / stack.name)
    if len(configs) != 2:
        raise UserError("nothing to compare", hint=USAGE)
    old, new = configs
    return _between(
        load_stack(old, override, profiles_dir),
        display_path(old),
        load_stack(new, override, profiles_dir),
        display_path(new),
    )


def _default_config() -> Path | None:
    from gpustack.commands.common import configs

    return configs([])[0]


def _snapshot(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """A render's objects (the cluster's and its GitOps objects), and its other files (every
    kustomization.yaml, node/) as bytes: the same split `committed.read` makes of a folder."""
    from gpustack import render

    rendering = render.render(stack)
    return snapshot(rendering)


def snapshot(rendering: Rendering) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    from gpustack import render

    objects = [*rendering.objects, *rendering.gitops_objects]
    files = {
        path: content
        for path, content in render.files(rendering).items()
        if path.rpartition("/")[2] == render.KUSTOMIZATION or path.startswith(f"{render.NODE_DIR}/")
    }
    return objects, files


def _between(old_stack: Stack, old_label: str, new_stack: Stack, new_label: str) -> Diff:
    from gpustack.diff import diff_files, diff_objects

    old_objects, old_files = _snapshot(old_stack)
    new_objects, new_files = _snapshot(new_stack)
    return diff_objects(old_objects, new_objects, old_label, new_label) + diff_files(
        old_files, new_files, old_label, new_label
    )


def _against_committed(stack: Stack, folder: Path) -> Diff:
    from gpustack import committed
    from gpustack.diff import diff_files, diff_objects
    from gpustack.errors import display_path

    shown = display_path(folder)
    if not folder.is_dir():
        warning(f"{shown} does not exist: a render would write every file")
    old = committed.read(folder)
    new_objects, new_files = _snapshot(stack)
    return diff_objects(old.objects, new_objects, shown, "rendered") + diff_files(
        old.files, new_files, shown, "rendered"
    )


def _use_color(mode: ColorMode) -> bool:
    if mode is ColorMode.auto:
        # https://no-color.org: a non-empty NO_COLOR turns colour off unless explicitly asked for.
        return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return mode is ColorMode.always
