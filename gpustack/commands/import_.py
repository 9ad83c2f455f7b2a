"""`gpustack import FILE...`: a gpustack config from a GPU Operator ClusterPolicy, the GPU
Operator's or the device-plugin chart's Helm values and device plugin configs; the config on
stdout (or `-o`), the report of what became of each input field on stderr."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


def operator_versions(incomplete: str) -> list[str]:
    """Shell completion of --operator-version: the releases the importer knows."""
    from gpustack.adopt import releases

    return [version for version in releases.releases() if version.startswith(incomplete)]


app = common.application()


@app.command("import")
def run(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="A ClusterPolicy (`kubectl get clusterpolicy -o yaml`, or from Git), the GPU "
            "Operator's or the device-plugin chart's values, device plugin configs (files, or "
            "ConfigMaps holding them).",
            metavar="FILE...",
            show_default=False,
        ),
    ],
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            help="The platform profile; guessed from the inputs where they name it.",
            metavar="PROFILE",
            autocompletion=common.profile_names,
        ),
    ] = None,
    output_file: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output-file",
            help="Write the config to this new file instead of stdout (an existing file is "
            "kept: see --force).",
            metavar="CONFIG",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With -o, replace an existing file.")
    ] = False,
    output: Annotated[
        ReportFormat,
        typer.Option(
            "--output", help="The report's format on stderr: text or json.", metavar="FORMAT"
        ),
    ] = ReportFormat.text,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Render the imported config and report each difference from what the operator "
            "(or the chart) runs for these inputs; exit 1 when a component the operator runs "
            "would stop running.",
        ),
    ] = False,
    operator_version: Annotated[
        str | None,
        typer.Option(
            "--operator-version",
            help="The GPU Operator release the inputs were written for (`helm list -n "
            "gpu-operator`), whose defaults fill in what they leave out; default: the "
            "ClusterPolicy's Helm labels, else the newest release the importer knows.",
            metavar="VERSION",
            autocompletion=operator_versions,
        ),
    ] = None,
    profiles_dir: common.ProfilesDir = None,
    debug: common.Debug = False,
) -> int:
    """Write a gpustack config equivalent to a GPU Operator or device-plugin chart install."""
    from gpustack.adopt import adoption

    result = adoption.import_config(
        adoption.ImportRequest(
            files=files,
            profile=profile,
            output_file=output_file,
            force=force,
            check=check,
            operator_version=operator_version,
            profiles_dir=profiles_dir,
        )
    )
    if output_file is None:
        common.echo(result.config, nl=False)
    common.echo(result.report(output.value), err=True, nl=False)
    if result.written is not None:
        common.echo(f"wrote {result.written}", err=True)
    return result.exit_code
