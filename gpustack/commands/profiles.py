"""`gpustack profiles list|show|diff`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from gpustack.commands import common
from gpustack.commands.common import TextOrJson, echo

app = common.application(help="List, show and compare platform profiles.")


def _profile(metavar: str, help: str = "") -> Any:
    """A profile's name as an argument, completed from the profiles there are."""
    return typer.Argument(
        help=help, metavar=metavar, autocompletion=common.profile_names, show_default=False
    )


@app.command("list")
def list_(profiles_dir: common.ProfilesDir = None, debug: common.Debug = False) -> int:
    """List the available profiles with a one-line description."""
    from gpustack.errors import UserError
    from gpustack.resolve import platform_profiles as profiles

    names = profiles.available(profiles_dir)
    width = max(len(name) for name in names)
    broken: list[UserError] = []
    for name in names:
        try:
            profile, _ = profiles.load(name, profiles_dir)
        except UserError as problem:
            # Every profile is listed; each broken file is named once after (a built-in profile
            # that extends a broken one of the user's fails with the same message).
            if str(problem) not in {str(other) for other in broken}:
                broken.append(problem)
            continue
        echo(f"{name:<{width}}  {profile.metadata.description}")
    if broken:
        first, *rest = broken
        first.also = (*first.also, *rest)
        raise first
    return 0


@app.command("show")
def show(
    name: Annotated[str, _profile("NAME")],
    profiles_dir: common.ProfilesDir = None,
    debug: common.Debug = False,
) -> int:
    """Print a profile with its `extends:` chain merged, as YAML."""
    from gpustack import emit
    from gpustack.resolve import platform_profiles as profiles

    profile, _ = profiles.load(name, profiles_dir)
    echo(emit.dump(profile.model_dump(mode="json", exclude_none=True)), nl=False)
    return 0


@app.command("diff")
def diff(
    first: Annotated[str, _profile("A", "Profile shown in the left column.")],
    second: Annotated[str, _profile("B", "Profile shown in the right column.")],
    profiles_dir: common.ProfilesDir = None,
    output: Annotated[
        TextOrJson,
        typer.Option("--output", help="text (a table) or json.", metavar="FORMAT"),
    ] = TextOrJson.text,
    debug: common.Debug = False,
) -> int:
    """Show side by side the facts and defaults two profiles set differently (exit 1 if any)."""
    from gpustack.errors import UserError, did_you_mean
    from gpustack.resolve import platform_profiles as profiles

    available = profiles.available(profiles_dir)
    settings = []
    for name in (first, second):
        if name not in available:
            raise UserError(
                f"unknown profile {name!r}",
                hint=did_you_mean(name, available) or f"available: {', '.join(available)}",
            )
        profile, _ = profiles.load(name, profiles_dir)
        dumped = profile.model_dump(mode="json", exclude_none=True)
        settings.append(_flatten({"facts": dumped["facts"], "defaults": dumped["defaults"]}))
    old, new = settings
    paths = sorted(old.keys() | new.keys(), key=lambda path: (not path.startswith("facts"), path))
    rows = [
        (path, old.get(path), new.get(path)) for path in paths if old.get(path) != new.get(path)
    ]
    if output is TextOrJson.json:
        differences = [{"path": path, "a": a, "b": b} for path, a, b in rows]
        echo(json.dumps({"a": first, "b": second, "differences": differences}, indent=2))
    elif rows:
        table = [("path", first, second), *((path, _cell(a), _cell(b)) for path, a, b in rows)]
        widths = [max(len(row[column]) for row in table) for column in range(2)]
        for path, a, b in table:
            echo(f"{path:<{widths[0]}}  {a:<{widths[1]}}  {b}")
    else:
        echo(f"profiles {first} and {second} set the same facts and defaults")
    return 1 if rows else 0


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Mappings flattened to dotted paths; lists and scalars are leaves; {} sets nothing."""
    from gpustack.compare.object_diff import join_path

    if not isinstance(value, dict):
        return {path: value}
    flat: dict[str, Any] = {}
    for key, child in value.items():
        flat.update(_flatten(child, join_path(path, key)))
    return flat


def _cell(value: Any) -> str:
    """A value on one line, in YAML flow style; `-` when the profile does not set it."""
    from gpustack.emit import scalar

    if value is None:
        return "-"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_cell(child)}" for key, child in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_cell(child) for child in value) + "]"
    return scalar(value)
