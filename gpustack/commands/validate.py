"""`gpustack validate`: strict, offline schema validation (and lint) of any Kubernetes manifests."""

from __future__ import annotations

import sys

import typer

from gpustack.commands.common import handles_user_errors

ENGINES = ("builtin", "kubeconform")


@handles_user_errors
def command(
    paths: list[str] = typer.Argument(
        None, metavar="[PATH ... | -]",
        help="Files, folders (walked for .yaml, .yml, .json) or - for stdin (the default).",
    ),
    kubernetes_version: str | None = typer.Option(
        None, "--kubernetes-version",
        help="Target version (default: platform.kubernetesVersion of ./gpustack.yaml, else the "
             "newest with installed schemas).",
    ),
    schema_locations: list[str] = typer.Option(
        None, "--schema-location",
        help="kubeconform-style location, tried in order (repeatable): 'default' (core kinds), "
             "'gpustack' (the project's CRD schemas), a folder, or a path template ending in "
             ".json. Default: default, then gpustack.",
    ),
    skip: list[str] = typer.Option(
        None, "--skip", help="Kinds (or apiVersion/Kind) to skip, comma-separated (repeatable)."
    ),
    reject: list[str] = typer.Option(
        None, "--reject", help="Kinds (or apiVersion/Kind) to reject, comma-separated (repeatable)."
    ),
    ignore_missing_schemas: bool = typer.Option(
        False, "--ignore-missing-schemas", help="Skip resources whose kind has no schema."
    ),
    ignore_filename_patterns: list[str] = typer.Option(
        None, "--ignore-filename-pattern",
        help="Regular expression of file paths to leave out (repeatable).",
    ),
    output: str = typer.Option(
        "text", "-o", "--output", help="text, json, junit, tap or sarif."
    ),
    summary: bool = typer.Option(False, "--summary", help="Print a summary line (text, json)."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Also report valid and skipped resources."
    ),
    no_lint: bool = typer.Option(False, "--no-lint", help="Schema validation only, no lint rules."),
    engine: str = typer.Option(
        "builtin", "--engine", help="builtin, or kubeconform (a kubeconform binary on PATH)."
    ),
) -> None:
    """Validate Kubernetes manifests against strict schemas, offline; exit 1 if any is invalid."""

    from gpustack.errors import UserError, did_you_mean
    from gpustack.validation import report, schemas

    if output not in report.FORMATS:
        raise UserError(f"unknown output format {output!r}", field="--output",
                        hint=did_you_mean(output, report.FORMATS) or ", ".join(report.FORMATS))
    if engine not in ENGINES:
        raise UserError(f"unknown engine {engine!r}", field="--engine",
                        hint=did_you_mean(engine, ENGINES) or ", ".join(ENGINES))
    version = schemas.minor_version(kubernetes_version or _default_version())
    locations = tuple(schema_locations or schemas.DEFAULT_LOCATIONS)
    store = schemas.store(version, locations)  # a bad template is a usage error before any work
    skipped, rejected = _kinds(skip), _kinds(reject)
    from gpustack.patterns import linear_regex

    ignored = [linear_regex(p, "--ignore-filename-pattern") for p in ignore_filename_patterns or []]
    targets = list(paths or ["-"])

    if engine == "kubeconform":
        _run_kubeconform(targets, version, locations, output, summary, verbose, skipped, rejected,
                         ignore_missing_schemas, ignore_filename_patterns or [])

    from gpustack.validation import manifests
    from gpustack.validation.validator import lint_results, validate_resources

    files = [path for path in manifests.files(targets)
             if not any(pattern.search(path) for pattern in ignored)]
    resources = [
        resource for path in files
        for resource in manifests.read(path, sys.stdin.buffer if path == manifests.STDIN else None)
    ]
    results = validate_resources(resources, store, frozenset(skipped), frozenset(rejected),
                                 ignore_missing_schemas)
    unplaced = []
    if not no_lint:
        unplaced = lint_results(results, version)
    shown = ["stdin" if path == manifests.STDIN else path for path in files]
    outcome = report.Report(results, shown, unplaced, stdin_only=targets == ["-"])
    typer.echo(report.render(outcome, output, summary, verbose), nl=False)
    raise typer.Exit(1 if outcome.failed else 0)


def _default_version() -> str:
    """platform.kubernetesVersion of ./gpustack.yaml when there is one, else the newest known."""
    from gpustack.fleet import DEFAULT_CONFIG
    from gpustack.validation.schemas import supported_versions

    if DEFAULT_CONFIG.is_file():
        from gpustack.config import load_stack

        return load_stack(DEFAULT_CONFIG, None, None).config.platform.kubernetesVersion
    return supported_versions()[-1]


def _kinds(values: list[str] | None) -> list[str]:
    return [kind.strip() for value in values or [] for kind in value.split(",") if kind.strip()]


def _run_kubeconform(
    targets: list[str], version: str, locations: tuple[str, ...], output: str, summary: bool,
    verbose: bool, skip: list[str], reject: list[str], ignore_missing_schemas: bool,
    ignore_filename_patterns: list[str],
) -> None:
    from gpustack.commands.common import error
    from gpustack.validation import kubeconform

    if output == "sarif":
        error("kubeconform has no sarif output; use --engine builtin for sarif")
        raise typer.Exit(2)
    binary = kubeconform.find()
    if binary is None:
        error("--engine kubeconform: no kubeconform binary on PATH "
              "(install kubeconform, or use the builtin engine, which needs nothing else)")
        raise typer.Exit(2)
    argv = kubeconform.command_line(binary, targets, version, locations, output, summary, verbose,
                                    skip, reject, ignore_missing_schemas, ignore_filename_patterns)
    stdin = sys.stdin.buffer.read() if "-" in targets else None
    raise typer.Exit(kubeconform.run(argv, stdin))
