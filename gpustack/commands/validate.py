"""`gpustack validate`: strict, offline schema validation (and lint) of any Kubernetes manifests.

It is also a drop-in for kubeconform: kubeconform's single-dash flags (`-strict`, `-summary`,
`-output json`, `-kubernetes-version=1.31.0`...) are translated before the command line is parsed.
A flag means the same in either spelling, so the same input gets the same verdict; where
gpustack's defaults are not kubeconform's (strict, lint rules, `metadata.name`, the bundled CRD
schemas), a run spelled kubeconform's way says so once on stderr (`spelling_note`), and
`--kubeconform-defaults` asks for kubeconform's.

Its options are declared once, in `run`'s signature, and `translate` writes kubeconform's
spelling as theirs (`KubeconformFlags`, before typer reads the command line), so help, messages
and completion are those of the options.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from gpustack.commands import common
from gpustack.commands.common import echo
from gpustack.errors import UserError, did_you_mean

ENGINES = ("builtin", "kubeconform")
# validation.report.FORMATS, which a test keeps equal (here: completion must not load it).
OUTPUTS = ("text", "json", "junit", "tap", "sarif", "pretty")
KUBECONFORM_DEFAULTS = "--kubeconform-defaults"
# Set by `translate`, once per kubeconform flag on the command line, for the note it gets.
KUBECONFORM_FLAG = "--kubeconform-flag"
# kubeconform's -kubernetes-version default: the newest version (yannh/kubeconform
# pkg/config/config.go, v0.7.0).
MASTER = "master"


# kubeconform's flags (yannh/kubeconform pkg/config/config.go, v0.7.0) and gpustack's spelling of
# each: the switches, then the flags that take a value.
KUBECONFORM_SWITCHES = {
    "-ignore-missing-schemas": "--ignore-missing-schemas",
    "-summary": "--summary",
    "-verbose": "--verbose",
    "-strict": "--strict",
    "-exit-on-error": "--exit-on-error",
    "-h": "--help",
}
KUBECONFORM_VALUES = {
    "-kubernetes-version": "--kubernetes-version",
    "-schema-location": "--schema-location",
    "-skip": "--skip",
    "-reject": "--reject",
    "-ignore-filename-pattern": "--ignore-filename-pattern",
    "-output": "--output",
    "-n": "--jobs",
}
_FALSE = {"false", "0", "f", "F", "FALSE", "False"}  # Go's strconv.ParseBool
# kubeconform's flags about downloading schemas (pkg/config/config.go, v0.7.0): gpustack never
# downloads, so they are taken and left unused (said in the note), not refused.
DOWNLOAD_VALUES = ("-cache",)
DOWNLOAD_SWITCHES = ("-insecure-skip-tls-verify",)


def translate(args: list[str]) -> list[str]:
    """kubeconform's single-dash flags (`-flag`, `-flag value`, `-flag=value`, booleans also
    `-flag=false`) as gpustack's options, each recorded with KUBECONFORM_FLAG (for
    `spelling_note`); a flag's meaning does not depend on its spelling."""
    translated: list[str] = []
    used: list[str] = []
    arguments = iter(args)
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if name in KUBECONFORM_SWITCHES:
            used.append(name)
            if not equals or value not in _FALSE:
                translated.append(KUBECONFORM_SWITCHES[name])
            elif name == "-strict":
                translated.append("--no-strict")
        elif name in DOWNLOAD_SWITCHES:
            used.append(name)
        elif name in DOWNLOAD_VALUES:
            used.append(name)
            if not equals:
                next(arguments, None)
        elif name in KUBECONFORM_VALUES:
            used.append(name)
            translated.append(KUBECONFORM_VALUES[name])
            # With no value after it, the option is left without one: the parser says so.
            following = value if equals else next(arguments, None)
            if following is not None:
                translated.append(following)
        else:
            translated.append(argument)
    return [f"{KUBECONFORM_FLAG}={name}" for name in used] + translated


def spelling_note(
    flags: list[str],
    kubeconform_defaults: bool,
    strict: bool | None,
    lint: bool,
    builtin: bool,
    locations_given: bool,
    version_from_config: str | None,
) -> str | None:
    """What a command line spelled kubeconform's way gets where gpustack's defaults are not
    kubeconform's (yannh/kubeconform pkg/config/config.go, v0.7.0: not strict, no lint rules,
    schemas that do not require metadata.name, only the `default` location, Kubernetes
    `master`, and -skip and -reject each a single value, the last one kept), and the download
    flags it leaves unused; None when nothing the command line left open differs (or
    --kubeconform-defaults asks for kubeconform's)."""
    unused = [flag for flag in (*DOWNLOAD_VALUES, *DOWNLOAD_SWITCHES) if flag in flags]
    ignored = f"{' and '.join(unused)} unused (gpustack never downloads schemas)"
    if not flags or kubeconform_defaults:
        return ignored if unused else None
    differences = []
    if strict is None:
        differences.append("strict unless -strict=false")
    if lint:
        differences.append("lint rules unless --no-lint")
    if builtin:
        differences.append("metadata.name required")
    if not locations_given:
        differences.append("gpustack's CRD schemas after the core kinds'")
    if version_from_config is not None:
        differences.append(
            f"Kubernetes {version_from_config} of ./gpustack.yaml "
            f"(-kubernetes-version {MASTER}: the newest)"
        )
    for flag in ("-skip", "-reject"):
        if flags.count(flag) > 1:
            differences.append(f"the kinds of every {flag} (kubeconform keeps the last)")
    verdict = (
        "gpustack's verdict for kubeconform's flags: "
        + ", ".join(differences)
        + f"; {KUBECONFORM_DEFAULTS} gives kubeconform's"
    )
    return "; ".join([*([verdict] if differences else []), *([ignored] if unused else [])]) or None


class KubeconformFlags(TyperCommand):
    """validate's command: kubeconform's single-dash flags translated (`translate`) before
    typer reads the words after `validate`; words after `--` are paths, left as they are."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        at = args.index("--") if "--" in args else len(args)
        return super().parse_args(ctx, [*translate(args[:at]), *args[at:]])


app = common.application()


def _formats(incomplete: str) -> list[str]:
    return [each for each in OUTPUTS if each.startswith(incomplete)]


@app.command("validate", cls=KubeconformFlags)
def run(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Files, folders (walked for .yaml, .yml, .json) or - for stdin (the default).",
            metavar="PATH|-",
            show_default=False,
        ),
    ] = None,
    kubernetes_version: Annotated[
        str | None,
        typer.Option(
            "--kubernetes-version",
            help="Target version, x.y or x.y.z, or master for the newest with installed schemas "
            "(default: platform.kubernetesVersion of ./gpustack.yaml, else the newest).",
            metavar="VERSION",
        ),
    ] = None,
    schema_locations: Annotated[
        list[str] | None,
        typer.Option(
            "--schema-location",
            help="kubeconform-style location, tried in order (repeatable): 'default' (core "
            "kinds), 'gpustack' (the project's CRD schemas), a folder, or a path template "
            "ending in .json. Default: default, then gpustack.",
            metavar="LOCATION",
            show_default=False,
        ),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option(
            "--skip",
            help="Kinds (or apiVersion/Kind) to skip, comma-separated (repeatable).",
            metavar="KINDS",
            show_default=False,
        ),
    ] = None,
    reject: Annotated[
        list[str] | None,
        typer.Option(
            "--reject",
            help="Kinds (or apiVersion/Kind) to reject, comma-separated (repeatable).",
            metavar="KINDS",
            show_default=False,
        ),
    ] = None,
    ignore_missing_schemas: Annotated[
        bool,
        typer.Option("--ignore-missing-schemas", help="Skip resources whose kind has no schema."),
    ] = False,
    ignore_filename_patterns: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore-filename-pattern",
            help="Regular expression of file paths to leave out (repeatable).",
            metavar="REGEX",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str,
        typer.Option(
            "-o",
            "--output",
            help="text, json, junit, tap, sarif or pretty.",
            metavar="FORMAT",
            autocompletion=_formats,
        ),
    ] = "text",
    summary: Annotated[
        bool, typer.Option("--summary", help="Print a summary line (text, json).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Also report valid and skipped resources.")
    ] = False,
    no_lint: Annotated[
        bool, typer.Option("--no-lint", help="Schema validation only, no lint rules.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="builtin, or kubeconform (a kubeconform binary on PATH).",
            metavar="ENGINE",
        ),
    ] = "builtin",
    strict: Annotated[
        bool | None,
        typer.Option(
            "--strict/--no-strict",
            help="Unknown fields and duplicate keys are errors (default: on, in either "
            "spelling; kubeconform's -strict=false is --no-strict).",
            show_default=False,
        ),
    ] = None,
    exit_on_error: Annotated[
        bool,
        typer.Option(
            "--exit-on-error", help="Stop at the first resource that is invalid or in error."
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            help="Worker processes (default: one per CPU for large inputs).",
            metavar="N",
            min=1,
        ),
    ] = None,
    kubeconform_defaults: Annotated[
        bool,
        typer.Option(
            KUBECONFORM_DEFAULTS,
            help="kubeconform's verdicts (never implied by its single-dash flags): not strict "
            "unless --strict, no lint, no name required, the newest Kubernetes version.",
        ),
    ] = False,
    kubeconform_flags: Annotated[
        list[str] | None,
        typer.Option(
            KUBECONFORM_FLAG,
            help="A kubeconform flag the command line used (set by `translate`).",
            hidden=True,
        ),
    ] = None,
    debug: common.Debug = False,
) -> int:
    """Validate Kubernetes manifests against strict schemas, offline; exit 1 if any is invalid."""
    # Deferred, as each validation import here: this module loads for every command line.
    from gpustack.validation import report, schemas

    if output not in report.FORMATS:
        raise UserError(
            f"unknown output format {output!r}",
            field="--output",
            hint=did_you_mean(output, report.FORMATS) or ", ".join(report.FORMATS),
        )
    if engine not in ENGINES:
        raise UserError(
            f"unknown engine {engine!r}",
            field="--engine",
            hint=did_you_mean(engine, ENGINES) or ", ".join(ENGINES),
        )
    version_from_config = None
    version_given = kubernetes_version is not None or kubeconform_defaults
    if kubernetes_version == MASTER or (kubernetes_version is None and kubeconform_defaults):
        version = schemas.supported_versions()[-1]
    elif kubernetes_version is not None:
        version = schemas.minor_version(kubernetes_version)
    else:
        version, version_from_config = _default_version()
    # The bundled CRD schemas apply whatever the spelling; a location given replaces them, as
    # kubeconform's -schema-location replaces its default.
    locations = tuple(schema_locations or schemas.DEFAULT_LOCATIONS)
    schemas.store(version, locations)  # a bad template is a usage error before any work
    skipped, rejected = _kinds(skip), _kinds(reject)
    from gpustack.read.patterns import linear_regex

    ignored = [linear_regex(p, "--ignore-filename-pattern") for p in ignore_filename_patterns or []]
    targets = list(paths or ["-"])

    lint = not no_lint and not kubeconform_defaults
    note = spelling_note(
        kubeconform_flags or [],
        kubeconform_defaults,
        strict,
        lint and engine == "builtin",
        engine == "builtin",
        bool(schema_locations),
        version_from_config,
    )
    if note is not None:
        echo(f"note: {note}", err=True)
    strict = strict if strict is not None else not kubeconform_defaults
    if engine == "kubeconform":
        from gpustack.validation import kubeconform

        binary = _kubeconform_binary(output)
        if binary is None:
            return 2
        argv = kubeconform.command_line(
            binary,
            targets,
            version,
            locations,
            output,
            summary,
            verbose,
            skipped,
            rejected,
            ignore_missing_schemas,
            ignore_filename_patterns or [],
            strict=strict,
            exit_on_error=exit_on_error,
            jobs=jobs,
        )
        return kubeconform.run(argv, sys.stdin.buffer if "-" in targets else None)

    import itertools
    from dataclasses import replace

    from gpustack.validation import engine as checks
    from gpustack.validation import manifests
    from gpustack.validation.verdicts import Result, lint_results

    settings = checks.Settings(
        version,
        locations,
        frozenset(skipped),
        frozenset(rejected),
        ignore_missing_schemas,
        strict=strict,
        require_name=not kubeconform_defaults,
        keep_objects=lint,
    )
    files = [
        path
        for path in manifests.files(targets)
        if not any(pattern.search(path) for pattern in ignored)
    ]
    # Each rendered cluster folder against the version it was rendered for, unless a version
    # was asked for; other files against `version`.
    versions = {} if version_given else _cluster_versions(files)
    folders: dict[str, str | None] = {}

    def version_of(path: str) -> str:
        if not versions or path == manifests.STDIN:
            return version
        folder = manifests.cluster_folder(path, folders)
        return versions.get(folder, version) if folder is not None else version

    # One run of the checker per version, each with its workers and its cache of documents
    # met before (a fleet's clusters repeat them): the files of a version together, their
    # results put back in input order. --exit-on-error stops at the first failure in input
    # order, so it checks the files as they come.
    runs: list[list[tuple[int, str]]] = []
    if exit_on_error:
        for _, contiguous in itertools.groupby(
            enumerate(files), key=lambda pair: version_of(pair[1])
        ):
            runs.append(list(contiguous))
    else:
        by_version: dict[str, list[tuple[int, str]]] = {}
        for index, path in enumerate(files):
            by_version.setdefault(version_of(path), []).append((index, path))
        runs = list(by_version.values())
    checked_files: list[tuple[int, str, list[Result]]] = []
    for batch in runs:
        checked = checks.check_files(
            [path for _, path in batch],
            replace(settings, kubernetes_version=version_of(batch[0][1])),
            sys.stdin.buffer,
            jobs,
        )
        stop = False
        for (index, _), (file, found) in zip(batch, checked):
            checked_files.append((index, file, found))
            if exit_on_error and any(result.status in ("invalid", "error") for result in found):
                checked.close()
                stop = True
                break
        if stop:
            break
    checked_files.sort(key=lambda item: item[0])
    shown = [file for _, file, _ in checked_files]
    results = [result for _, _, found in checked_files for result in found]
    checks.resolve_custom_resources(results, settings)
    if exit_on_error:
        failed = [n for n, result in enumerate(results) if result.status in ("invalid", "error")]
        results = results[: failed[0] + 1] if failed else results
    unplaced = lint_results(results, version, versions) if lint else []
    outcome = report.Report(results, shown, unplaced, stdin_only=targets == ["-"])
    # pretty is coloured even into a pipe, as kubeconform's is, but never when NO_COLOR is set
    # (https://no-color.org).
    color = (not os.environ.get("NO_COLOR")) if output == "pretty" else None
    echo(report.formatted(outcome, output, summary, verbose), nl=False, color=color)
    return 1 if outcome.failed else 0


def _default_version() -> tuple[str, str | None]:
    """The minor version to validate against and, when ./gpustack.yaml gave it, that version:
    platform.kubernetesVersion of ./gpustack.yaml when there is one, else the newest known."""
    from gpustack.validation.schemas import minor_version, supported_versions

    if Path("gpustack.yaml").is_file():  # what a bare `gpustack render` renders (inventory.py)
        # Only then the config model: validate alone needs neither it nor the renderer.
        from gpustack.resolve.inventory import DEFAULT_CONFIG
        from gpustack.resolve.load import load_stack

        configured = load_stack(DEFAULT_CONFIG, None, None).config.platform.kubernetesVersion
        return minor_version(configured), configured
    return supported_versions()[-1], None


def _cluster_versions(files: list[str]) -> dict[str, str]:
    """The rendered cluster folders among `files`, each with the minor Kubernetes version it
    was rendered for (validation.manifests.cluster_version); folders that do not say are left
    out."""
    from gpustack.layout import KUBERNETES_VERSION
    from gpustack.validation import manifests
    from gpustack.validation.schemas import minor_version, supported_versions

    folders: dict[str, str | None] = {}
    found: dict[str, str] = {}
    read: set[str] = set()
    for path in files:
        folder = manifests.cluster_folder(path, folders) if path != manifests.STDIN else None
        if folder is None or folder in read:
            continue
        read.add(folder)
        written = manifests.cluster_version(folder)
        if written is not None:
            value, where = written
            try:
                found[folder] = minor_version(value)
            except UserError:
                # The value is not repeated: a committed file may hold anything.
                versions = supported_versions()
                raise UserError(
                    "not a Kubernetes version gpustack has schemas for",
                    where,
                    field=f"metadata.annotations.{KUBERNETES_VERSION}",
                    hint=f"the version the folder was rendered for, {versions[0]} to "
                    f"{versions[-1]}: render it again, or give --kubernetes-version",
                ) from None
    return found


def _kinds(values: list[str] | None) -> list[str]:
    return [kind.strip() for value in values or [] for kind in value.split(",") if kind.strip()]


def _kubeconform_binary(output: str) -> str | None:
    """The kubeconform binary to run, or None (the reason printed) when it cannot run."""
    from gpustack.validation import kubeconform

    if output == "sarif":
        echo("error: kubeconform has no sarif output; use --engine builtin for sarif", err=True)
        return None
    binary = kubeconform.find()
    if binary is None:
        echo(
            "error: --engine kubeconform: no kubeconform binary on PATH "
            "(install kubeconform, or use the builtin engine, which needs nothing else)",
            err=True,
        )
    return binary
