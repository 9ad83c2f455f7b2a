"""`gpustack schema`: the config's JSON Schema, for editors and CI."""

from __future__ import annotations

import json

import typer


def command() -> None:
    """Print the JSON Schema of the GPUStack config."""
    from gpustack.model import GPUStack

    typer.echo(json.dumps(GPUStack.model_json_schema(), indent=2, sort_keys=True))
