"""`gpustack config show`: a cluster config as it is in force, merged from its profile's
defaults, its bases, the file and `--set`; with `--show-origin`, the file, line and column each
value comes from (as `git config --show-origin` does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from gpustack.commands import common

app = common.application(help="Show a cluster config as it is in force.")


@app.callback()
def group() -> None:
    """A group, though it has one command: more may join it, and a script names it in full."""


@app.command("show")
def show(
    config: Annotated[
        Path | None,
        typer.Argument(
            help="Cluster config (default ./gpustack.yaml, else the embedded kubeadm example).",
            metavar="CONFIG",
            show_default=False,
        ),
    ] = None,
    profile: common.Profile = None,
    profiles_dir: common.ProfilesDir = None,
    assignments: common.Assignments = None,
    show_origin: Annotated[
        bool,
        typer.Option(
            "--show-origin",
            help="Name the file, line and column each value comes from (a base, the profile's "
            "defaults, --set), one field a line.",
        ),
    ] = False,
    debug: common.Debug = False,
) -> int:
    """Print a config merged with its profile's defaults and its bases, as render reads it."""
    from gpustack import emit
    from gpustack.config.model import GPUStack
    from gpustack.resolve.checks.no_effect import without_effect
    from gpustack.resolve.layered_settings import merge, merge_layers, origin, without_taken_away
    from gpustack.resolve.load import load_with_layers, overrides

    if config is None and Path("gpustack.yaml").is_file():
        config = Path("gpustack.yaml")
    stack, layers = load_with_layers(
        config, profile, profiles_dir, override=overrides(assignments or [])
    )
    # The settings the layers write, each with the value in force (as validated: quoted,
    # typed, and what follows from other settings).
    in_force = stack.config.model_dump(mode="json", by_alias=True)
    # What the layers write, a null taking a base's value away as the loader takes it.
    written = merge(layers[0].data, without_taken_away(GPUStack, merge_layers(layers[1:])))
    for key in ("extends", "patches"):
        written.pop(key, None)
    shown = _in_force(written, in_force)
    # A base's settings are a fleet's defaults, taken where they have effect: say which do
    # nothing on this cluster, and why (the cluster's own would have been refused).
    for path, why in without_effect(stack, layers).items():
        common.echo(
            f"note: {_dotted(path)} (set at {origin(layers, path)}) has no effect here: {why}",
            err=True,
        )
    if not show_origin:
        common.echo(emit.dump(shown), nl=False)
        return 0
    rows = [(origin(layers, path), _dotted(path), value) for path, value in _leaves(shown)]
    width = max(len(where) for where, _, _ in rows)
    for where, field, value in rows:
        common.echo(f"{where:<{width}}  {field}={_value(value)}")
    return 0


def _in_force(written: Any, in_force: Any) -> Any:
    """`written`'s keys, in the config's order, with the values of `in_force` (where it has
    them)."""
    if isinstance(written, dict) and written and isinstance(in_force, dict):
        ordered = [key for key in in_force if key in written]
        ordered += [key for key in written if key not in in_force]
        return {
            key: _in_force(written[key], in_force[key]) if key in in_force else written[key]
            for key in ordered
        }
    return in_force


def _leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Each value of nested mappings with its path; lists and empty mappings are values."""
    if isinstance(value, dict) and value:
        return [leaf for key, child in value.items() for leaf in _leaves(child, (*path, key))]
    return [(path, value)]


def _dotted(path: tuple[str, ...]) -> str:
    # As --set takes it: a key holding dots (a label key) is escaped.
    return ".".join(key.replace(".", "\\.") for key in path)


def _value(value: Any) -> str:
    from gpustack.emit import scalar

    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return scalar(value)
