"""`gpustack import FILE...`: a gpustack config from a GPU Operator ClusterPolicy, the GPU
Operator's or the device-plugin chart's Helm values and device plugin configs; the config on
stdout (or `-o`), the report of what became of each input field on stderr."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from gpustack.commands import common
from gpustack.commands.common import handles_user_errors


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


@handles_user_errors
def command(
    files: list[Path] = typer.Argument(
        ...,
        metavar="FILE...",
        help="A ClusterPolicy (`kubectl get clusterpolicy -o yaml`, or from Git), the GPU "
        "Operator's or the device-plugin chart's values, device plugin configs (files, or "
        "ConfigMaps holding them).",
    ),
    profile: str | None = typer.Option(
        None,
        "--profile",
        metavar="PROFILE",
        help="The platform profile; guessed from the inputs where they name it.",
        autocompletion=common.profile_names,
    ),
    output_file: Path | None = typer.Option(
        None,
        "-o",
        "--output-file",
        metavar="CONFIG",
        help="Write the config to this new file instead of stdout (an existing file is kept: "
        "see --force).",
    ),
    force: bool = typer.Option(False, "--force", help="With -o, replace an existing file."),
    output: ReportFormat = typer.Option(
        ReportFormat.text, "--output", help="The report's format on stderr: text or json."
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Render the imported config and report each difference from what the operator "
        "(or the chart) runs for these inputs.",
    ),
    profiles_dir: Path | None = common.PROFILES_DIR.typer(),
) -> None:
    """Write a gpustack config equivalent to a GPU Operator or device-plugin chart install."""
    import json

    from gpustack import adoption, importing, profiles
    from gpustack.errors import display_path

    documents, stems = adoption.read_inputs(files)
    inputs = importing.classify(documents, stems)
    if profile is None:
        profile, reason = importing.guess_profile(inputs, profiles.available(profiles_dir))
    else:
        reason = "given with --profile"
    loaded, _ = profiles.load(profile, profiles_dir)
    name = importing.config_name(output_file.stem if output_file else None)
    imported = importing.import_inputs(inputs, loaded, reason, name)
    text = adoption.config_text(imported, [display_path(each) for each in files])
    stack = adoption.load(text, output_file, profiles_dir)
    differences = adoption.check(stack, imported) if check else None
    if output_file is None:
        typer.echo(text, nl=False)
    else:
        adoption.write_config(output_file, text, force)
    shown = [display_path(each) for each in files]
    if output is ReportFormat.json:
        report = {
            "profile": imported.profile,
            "profileReason": imported.profile_reason,
            "entries": [entry.as_json() for entry in imported.entries],
        }
        if differences is not None:
            report["differences"] = [each.as_json() for each in differences]
        typer.echo(json.dumps(report, indent=2, sort_keys=True), err=True)
    else:
        typer.echo(importing.report_text(imported, shown), err=True, nl=False)
        if differences is not None:
            typer.echo(adoption.differences_text(differences), err=True, nl=False)
    if output_file is not None:
        typer.echo(f"wrote {display_path(output_file)}", err=True)
