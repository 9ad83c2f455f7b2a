"""`gpustack validate`: strict, offline schema validation (and lint) of any Kubernetes manifests.

It is also a drop-in for kubeconform: kubeconform's single-dash flags (`-strict`, `-summary`,
`-output json`, `-kubernetes-version=1.31.0`...) are translated before the command line is parsed.
A flag means the same in either spelling, so the same input gets the same verdict; where
gpustack's defaults are not kubeconform's (strict, lint rules, `metadata.name`, the bundled CRD
schemas), a run spelled kubeconform's way says so once on stderr (`spelling_note`), and
`--kubeconform-defaults` asks for kubeconform's.

Its options are declared once, in `run`'s signature, and `validation.kubeconform_flags.translate`
writes kubeconform's spelling as theirs (`KubeconformFlags`, before typer reads the command
line), so help, messages and completion are those of the options. The run is
`gpustack.validation.validate`; this module prints its report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from gpustack.commands import common
from gpustack.commands.common import echo

# validation.report.FORMATS, which a test keeps equal (here: completion must not load it).
OUTPUTS = ("text", "json", "junit", "tap", "sarif", "pretty")


class KubeconformFlags(TyperCommand):
    """validate's command: kubeconform's single-dash flags translated (`translate`) before
    typer reads the words after `validate`; words after `--` are paths, left as they are."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from gpustack.validation.kubeconform_flags import translate

        at = args.index("--") if "--" in args else len(args)
        return super().parse_args(ctx, [*translate(args[:at]), *args[at:]])


app = common.application()


def _formats(incomplete: str) -> list[str]:
    return [each for each in OUTPUTS if each.startswith(incomplete)]


# validate's options, each a parameter type of `run`.
Paths = Annotated[
    list[str] | None,
    typer.Argument(
        help="Files, folders (walked for .yaml, .yml, .json) or - for stdin (the default).",
        metavar="PATH|-",
        show_default=False,
    ),
]
KubernetesVersion = Annotated[
    str | None,
    typer.Option(
        "--kubernetes-version",
        help="Target version, x.y or x.y.z, or master for the newest with installed schemas "
        "(default: platform.kubernetesVersion of ./gpustack.yaml, else the newest).",
        metavar="VERSION",
    ),
]
SchemaLocations = Annotated[
    list[str] | None,
    typer.Option(
        "--schema-location",
        help="kubeconform-style location, tried in order (repeatable): 'default' (core "
        "kinds), 'gpustack' (the project's CRD schemas), a folder, or a path template "
        "ending in .json. Default: default, then gpustack.",
        metavar="LOCATION",
        show_default=False,
    ),
]
Skip = Annotated[
    list[str] | None,
    typer.Option(
        "--skip",
        help="Kinds (or apiVersion/Kind) to skip, comma-separated (repeatable).",
        metavar="KINDS",
        show_default=False,
    ),
]
Reject = Annotated[
    list[str] | None,
    typer.Option(
        "--reject",
        help="Kinds (or apiVersion/Kind) to reject, comma-separated (repeatable).",
        metavar="KINDS",
        show_default=False,
    ),
]
IgnoreMissingSchemas = Annotated[
    bool,
    typer.Option("--ignore-missing-schemas", help="Skip resources whose kind has no schema."),
]
IgnoreFilenamePatterns = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore-filename-pattern",
        help="Regular expression of file paths to leave out (repeatable).",
        metavar="REGEX",
        show_default=False,
    ),
]
Output = Annotated[
    str,
    typer.Option(
        "-o",
        "--output",
        help="text, json, junit, tap, sarif or pretty.",
        metavar="FORMAT",
        autocompletion=_formats,
    ),
]
Summary = Annotated[bool, typer.Option("--summary", help="Print a summary line (text, json).")]
Verbose = Annotated[
    bool, typer.Option("--verbose", help="Also report valid and skipped resources.")
]
NoLint = Annotated[bool, typer.Option("--no-lint", help="Schema validation only, no lint rules.")]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="builtin, or kubeconform (a kubeconform binary on PATH).",
        metavar="ENGINE",
    ),
]
Strict = Annotated[
    bool | None,
    typer.Option(
        "--strict/--no-strict",
        help="Unknown fields and duplicate keys are errors (default: on, in either "
        "spelling; kubeconform's -strict=false is --no-strict).",
        show_default=False,
    ),
]
ExitOnError = Annotated[
    bool,
    typer.Option("--exit-on-error", help="Stop at the first resource that is invalid or in error."),
]
Jobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        help="Worker processes (default: one per CPU for large inputs).",
        metavar="N",
        min=1,
    ),
]
KubeconformDefaults = Annotated[
    bool,
    typer.Option(
        "--kubeconform-defaults",  # kubeconform_flags.KUBECONFORM_DEFAULTS
        help="kubeconform's verdicts (never implied by its single-dash flags): not strict "
        "unless --strict, no lint, no name required, the newest Kubernetes version.",
    ),
]
FlagsUsed = Annotated[
    list[str] | None,
    typer.Option(
        "--kubeconform-flag",  # kubeconform_flags.KUBECONFORM_FLAG
        help="A kubeconform flag the command line used (set by `translate`).",
        hidden=True,
    ),
]


@app.command("validate", cls=KubeconformFlags)
def run(
    paths: Paths = None,
    kubernetes_version: KubernetesVersion = None,
    schema_locations: SchemaLocations = None,
    skip: Skip = None,
    reject: Reject = None,
    ignore_missing_schemas: IgnoreMissingSchemas = False,
    ignore_filename_patterns: IgnoreFilenamePatterns = None,
    output: Output = "text",
    summary: Summary = False,
    verbose: Verbose = False,
    no_lint: NoLint = False,
    engine: Engine = "builtin",
    strict: Strict = None,
    exit_on_error: ExitOnError = False,
    jobs: Jobs = None,
    kubeconform_defaults: KubeconformDefaults = False,
    kubeconform_flags: FlagsUsed = None,
    debug: common.Debug = False,
) -> int:
    """Validate Kubernetes manifests against strict schemas, offline; exit 1 if any is invalid."""
    from gpustack.validation.validate import ValidateRequest, validate

    request = ValidateRequest(
        tuple(paths or ()),
        kubernetes_version,
        tuple(schema_locations or ()),
        tuple(skip or ()),
        tuple(reject or ()),
        ignore_missing_schemas,
        tuple(ignore_filename_patterns or ()),
        output,
        summary,
        verbose,
        not no_lint,
        engine,
        strict,
        exit_on_error,
        jobs,
        kubeconform_defaults,
        tuple(kubeconform_flags or ()),
    )
    validated = validate(request, common.messages(), _configured_version)
    for message in validated.errors:
        echo(f"error: {message}", err=True)
    if validated.output:
        echo(validated.output, nl=False, color=validated.color)
    return validated.exit_code


def _configured_version() -> str | None:
    """platform.kubernetesVersion of ./gpustack.yaml, None without one."""
    if not Path("gpustack.yaml").is_file():  # what a bare `gpustack render` renders
        return None
    # Only then the config model: validate alone needs neither it nor the renderer.
    from gpustack.resolve.inventory import DEFAULT_CONFIG
    from gpustack.resolve.load import load_stack

    return load_stack(DEFAULT_CONFIG, None, None).config.platform.kubernetesVersion
