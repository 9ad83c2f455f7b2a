"""`gpustack profiles list|show`."""

from __future__ import annotations

from pathlib import Path

import typer

from gpustack.commands.common import handles_user_errors

app = typer.Typer(help="List and show platform profiles.", no_args_is_help=True)

ProfilesDir = typer.Option(
    None, "--profiles-dir", help="Folder of user profiles, searched before the built-in ones."
)


@app.command("list")
@handles_user_errors
def list_(profiles_dir: Path | None = ProfilesDir) -> None:
    """List the available profiles with a one-line description."""
    from gpustack import profiles

    names = profiles.available(profiles_dir)
    width = max(len(name) for name in names)
    for name in names:
        profile, _ = profiles.load(name, profiles_dir)
        typer.echo(f"{name:<{width}}  {profile.metadata.description}")


@app.command("show")
@handles_user_errors
def show(name: str, profiles_dir: Path | None = ProfilesDir) -> None:
    """Print a profile with its `extends:` chain merged, as YAML."""
    from gpustack import emit, profiles

    profile, _ = profiles.load(name, profiles_dir)
    typer.echo(emit.dump(profile.model_dump(mode="json", exclude_none=True)), nl=False)
