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
    from gpustack.adopt import importing

    return [version for version in importing.releases() if version.startswith(incomplete)]


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
    import json

    from gpustack.adopt import adoption, importing
    from gpustack.errors import display_path
    from gpustack.resolve import platform_profiles as profiles

    documents, stems = adoption.read_inputs(files)
    inputs = importing.classify(documents, stems)
    if profile is None:
        profile, reason = importing.guess_profile(inputs, profiles.available(profiles_dir))
    else:
        reason = "given with --profile"
    loaded, _ = profiles.load(profile, profiles_dir)
    name = importing.config_name(output_file.stem if output_file else None)
    imported = importing.import_inputs(inputs, loaded, reason, name, operator_version)
    imported, text, stack = adoption.load_imported(
        imported, [display_path(each) for each in files], output_file, profiles_dir
    )
    differences = adoption.check(stack, imported) if check else None
    if output_file is None:
        common.echo(text, nl=False)
    else:
        adoption.write_config(output_file, text, force)
    shown = [display_path(each) for each in files]
    if output is ReportFormat.json:
        report = {
            "profile": imported.profile,
            "profileReason": imported.profile_reason,
            "operatorVersion": imported.release,
            "operatorVersionReason": imported.release_reason or None,
            "entries": [entry.as_json() for entry in imported.entries],
        }
        if differences is not None:
            report["differences"] = [each.as_json() for each in differences]
        common.echo(json.dumps(report, indent=2, sort_keys=True), err=True)
    else:
        common.echo(importing.report_text(imported, shown), err=True, nl=False)
        if differences is not None:
            common.echo(adoption.differences_text(differences), err=True, nl=False)
    if output_file is not None:
        common.echo(f"wrote {display_path(output_file)}", err=True)
    # A component the operator runs that gpustack would not is a finding (exit 1), as stale
    # output is for `check`: the config is written all the same, for the user to change.
    return 1 if differences and any(each.stops for each in differences) else 0
