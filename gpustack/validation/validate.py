"""`gpustack validate`: any Kubernetes manifests checked against strict schemas, offline, and by
the lint rules; by the builtin engine, or by a kubeconform binary with the same flags.

    validate(request, say, configured_version) -> Validated

The Kubernetes version is the one asked for, else each rendered cluster folder's own (recorded
in its kustomization.yaml), else `platform.kubernetesVersion` of ./gpustack.yaml, else the
newest with schemas. The builtin engine checks the files of one version together (in worker
processes for a large input), then lints each cluster's objects once; the report comes in the
format asked for (`report.formatted`).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from gpustack.errors import UserError, did_you_mean
from gpustack.feedback import Messages
from gpustack.layout import KUBERNETES_VERSION
from gpustack.read.patterns import Pattern, linear_regex
from gpustack.validation import engine as checks
from gpustack.validation import kubeconform, manifests, report, schemas
from gpustack.validation.kubeconform_flags import MASTER, spelling_note
from gpustack.validation.verdicts import Result, lint_results

ENGINES = ("builtin", "kubeconform")


@dataclass(frozen=True)
class ValidateRequest:
    """What `gpustack validate` was asked: the manifests (`-` for stdin), the Kubernetes version
    and schema locations, what to skip, reject or leave out, the report's format, and how
    strictly to check (None: gpustack's default, strict unless --kubeconform-defaults)."""

    paths: tuple[str, ...] = ()
    kubernetes_version: str | None = None
    schema_locations: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    ignore_missing_schemas: bool = False
    ignore_filename_patterns: tuple[str, ...] = ()
    output: str = "text"
    summary: bool = False
    verbose: bool = False
    lint: bool = True
    engine: str = "builtin"
    strict: bool | None = None
    exit_on_error: bool = False
    jobs: int | None = None
    kubeconform_defaults: bool = False
    # The kubeconform flags the command line was spelled with (kubeconform_flags.translate).
    kubeconform_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Validated:
    """A run's outcome: its exit code, the report for stdout (empty when kubeconform printed
    its own, or could not run), whether to colour it (None: only on a terminal), and why
    kubeconform could not run (`errors`, one line each)."""

    exit_code: int
    output: str = ""
    color: bool | None = None
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Plan:
    """What a request comes to once its options are checked."""

    version: str
    version_given: bool
    locations: tuple[str, ...]
    skipped: frozenset[str]
    rejected: frozenset[str]
    ignored: list[Pattern]
    targets: list[str]
    strict: bool
    lint: bool


def validate(
    request: ValidateRequest, say: Messages, configured_version: Callable[[], str | None]
) -> Validated:
    """Validate the manifests `request` names. `configured_version` gives
    `platform.kubernetesVersion` of ./gpustack.yaml (None without one), asked only when no
    version is given; `say` hears a note on where a command line spelled kubeconform's way gets
    gpustack's verdict rather than kubeconform's (kubeconform_flags.spelling_note)."""
    _check_choice(request.output, report.FORMATS, "output format", "--output")
    _check_choice(request.engine, ENGINES, "engine", "--engine")
    version_from_config = None
    given = request.kubernetes_version
    if given == MASTER or (given is None and request.kubeconform_defaults):
        version = schemas.supported_versions()[-1]
    elif given is not None:
        version = schemas.minor_version(given)
    else:
        version_from_config = configured_version()
        version = (
            schemas.minor_version(version_from_config)
            if version_from_config is not None
            else schemas.supported_versions()[-1]
        )
    # The bundled CRD schemas apply whatever the spelling; a location given replaces them, as
    # kubeconform's -schema-location replaces its default.
    locations = request.schema_locations or schemas.DEFAULT_LOCATIONS
    schemas.store(version, locations)  # a bad template is a usage error before any work
    skipped, rejected = _kinds(request.skip), _kinds(request.reject)
    ignored = [
        linear_regex(p, "--ignore-filename-pattern") for p in request.ignore_filename_patterns
    ]
    builtin = request.engine == "builtin"
    lint = request.lint and not request.kubeconform_defaults
    spelled = spelling_note(
        list(request.kubeconform_flags),
        request.kubeconform_defaults,
        request.strict,
        lint and builtin,
        builtin,
        bool(request.schema_locations),
        version_from_config,
    )
    if spelled is not None:
        say.note(spelled)
    strict = request.strict if request.strict is not None else not request.kubeconform_defaults
    plan = _Plan(
        version,
        given is not None or request.kubeconform_defaults,
        locations,
        frozenset(skipped),
        frozenset(rejected),
        ignored,
        list(request.paths or ["-"]),
        strict,
        lint,
    )
    if not builtin:
        return _with_kubeconform(request, plan, skipped, rejected)
    return _with_builtin(request, plan)


def _check_choice(value: str, choices: tuple[str, ...], what: str, option: str) -> None:
    if value not in choices:
        raise UserError(
            f"unknown {what} {value!r}",
            field=option,
            hint=did_you_mean(value, choices) or ", ".join(choices),
        )


def _kinds(values: tuple[str, ...]) -> list[str]:
    return [kind.strip() for value in values for kind in value.split(",") if kind.strip()]


def _with_kubeconform(
    request: ValidateRequest, plan: _Plan, skipped: list[str], rejected: list[str]
) -> Validated:
    """The manifests checked by a kubeconform binary on PATH, which prints its own report."""
    if request.output == "sarif":
        return Validated(
            2, errors=("kubeconform has no sarif output; use --engine builtin for sarif",)
        )
    binary = kubeconform.find()
    if binary is None:
        return Validated(
            2,
            errors=(
                "--engine kubeconform: no kubeconform binary on PATH (install kubeconform, or "
                "use the builtin engine, which needs nothing else)",
            ),
        )
    argv = kubeconform.command_line(
        binary,
        plan.targets,
        plan.version,
        plan.locations,
        request.output,
        request.summary,
        request.verbose,
        skipped,
        rejected,
        request.ignore_missing_schemas,
        list(request.ignore_filename_patterns),
        strict=plan.strict,
        exit_on_error=request.exit_on_error,
        jobs=request.jobs,
    )
    return Validated(kubeconform.run(argv, sys.stdin.buffer if "-" in plan.targets else None))


def _with_builtin(request: ValidateRequest, plan: _Plan) -> Validated:
    """The manifests checked by gpustack's own engine, then linted, as a report."""
    settings = checks.Settings(
        plan.version,
        plan.locations,
        plan.skipped,
        plan.rejected,
        request.ignore_missing_schemas,
        strict=plan.strict,
        require_name=not request.kubeconform_defaults,
        keep_objects=plan.lint,
    )
    files = [
        path
        for path in manifests.files(plan.targets)
        if not any(pattern.search(path) for pattern in plan.ignored)
    ]
    # Each rendered cluster folder against the version it was rendered for, unless a version
    # was asked for; other files against `version`.
    versions = {} if plan.version_given else _cluster_versions(files)
    folders: dict[str, str | None] = {}

    def version_of(path: str) -> str:
        if not versions or path == manifests.STDIN:
            return plan.version
        folder = manifests.cluster_folder(path, folders)
        return versions.get(folder, plan.version) if folder is not None else plan.version

    checked = sorted(
        _checked(files, settings, version_of, request.exit_on_error, request.jobs),
        key=lambda item: item[0],
    )
    shown = [file for _, file, _ in checked]
    results = [result for _, _, found in checked for result in found]
    checks.resolve_custom_resources(results, settings)
    if request.exit_on_error:
        failed = [n for n, result in enumerate(results) if result.status in ("invalid", "error")]
        results = results[: failed[0] + 1] if failed else results
    unplaced = lint_results(results, plan.version, versions) if plan.lint else []
    outcome = report.Report(results, shown, unplaced, stdin_only=plan.targets == ["-"])
    # pretty is coloured even into a pipe, as kubeconform's is, but never when NO_COLOR is set
    # (https://no-color.org).
    color = (not os.environ.get("NO_COLOR")) if request.output == "pretty" else None
    text = report.formatted(outcome, request.output, request.summary, request.verbose)
    return Validated(1 if outcome.failed else 0, text, color)


def _checked(
    files: list[str],
    settings: checks.Settings,
    version_of: Callable[[str], str],
    exit_on_error: bool,
    jobs: int | None,
) -> Iterator[tuple[int, str, list[Result]]]:
    """(input position, file as shown, its results) of each file checked.

    One run of the checker per version, each with its workers and its cache of documents met
    before (a fleet's clusters repeat them): the files of a version together. --exit-on-error
    stops at the first failure in input order, so it checks the files as they come."""
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
    for batch in runs:
        checked = checks.check_files(
            [path for _, path in batch],
            replace(settings, kubernetes_version=version_of(batch[0][1])),
            sys.stdin.buffer,
            jobs,
        )
        for (index, _), (file, found) in zip(batch, checked):
            yield index, file, found
            if exit_on_error and any(result.status in ("invalid", "error") for result in found):
                checked.close()
                return


def _cluster_versions(files: list[str]) -> dict[str, str]:
    """The rendered cluster folders among `files`, each with the minor Kubernetes version it
    was rendered for (manifests.cluster_version); folders that do not say are left out."""
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
                found[folder] = schemas.minor_version(value)
            except UserError:
                # The value is not repeated: a committed file may hold anything.
                versions = schemas.supported_versions()
                raise UserError(
                    "not a Kubernetes version gpustack has schemas for",
                    where,
                    field=f"metadata.annotations.{KUBERNETES_VERSION}",
                    hint=f"the version the folder was rendered for, {versions[0]} to "
                    f"{versions[-1]}: render it again, or give --kubernetes-version",
                ) from None
    return found
