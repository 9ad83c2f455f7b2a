"""`gpustack validate`: strict, offline schema validation (and lint) of any Kubernetes manifests.

It is also a drop-in for kubeconform: kubeconform's single-dash flags (`-strict`, `-summary`,
`-output json`, `-kubernetes-version=1.31.0`...) are translated before the command line is parsed
and, when used, give kubeconform's meaning (see KUBECONFORM_DEFAULTS).

Its options are declared once, in OPTIONS: the typer command (`--help`, shell completion) is made
from them, and so is the small parser a plain run goes through (`main`), which spares
`gpustack validate` the start-up of typer's option machinery, as kubeconform has none.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.commands import GLOBAL_FLAGS
from gpustack.errors import UserError, did_you_mean

ENGINES = ("builtin", "kubeconform")
KUBECONFORM_DEFAULTS = "--kubeconform-defaults"


@dataclass(frozen=True)
class Option:
    """One option of the command: its parameter, gpustack's spellings, kubeconform's."""

    parameter: str
    names: tuple[str, ...]  # a switch with a negative form: "--strict/--no-strict"
    help: str
    value: type | None = None  # what it takes (str, int); None for a switch
    default: Any = None
    repeatable: bool = False
    # kubeconform's spelling (yannh/kubeconform pkg/config/config.go)
    kubeconform: str = ""
    minimum: int | None = None

    @property
    def annotation(self) -> Any:
        """The parameter's type, as typer reads it."""
        if self.repeatable:
            return list[str]
        kind = self.value or bool
        return kind if self.default is not None else kind | None


PATHS_METAVAR = "[PATH ... | -]"
PATHS_HELP = "Files, folders (walked for .yaml, .yml, .json) or - for stdin (the default)."
OPTIONS = (
    Option(
        "kubernetes_version",
        ("--kubernetes-version",),
        "Target version (default: platform.kubernetesVersion of ./gpustack.yaml, else the "
        "newest with installed schemas).",
        str,
        kubeconform="-kubernetes-version",
    ),
    Option(
        "schema_locations",
        ("--schema-location",),
        "kubeconform-style location, tried in order (repeatable): 'default' (core kinds), "
        "'gpustack' (the project's CRD schemas), a folder, or a path template ending in "
        ".json. Default: default, then gpustack.",
        str,
        repeatable=True,
        kubeconform="-schema-location",
    ),
    Option(
        "skip",
        ("--skip",),
        "Kinds (or apiVersion/Kind) to skip, comma-separated (repeatable).",
        str,
        repeatable=True,
        kubeconform="-skip",
    ),
    Option(
        "reject",
        ("--reject",),
        "Kinds (or apiVersion/Kind) to reject, comma-separated (repeatable).",
        str,
        repeatable=True,
        kubeconform="-reject",
    ),
    Option(
        "ignore_missing_schemas",
        ("--ignore-missing-schemas",),
        "Skip resources whose kind has no schema.",
        default=False,
        kubeconform="-ignore-missing-schemas",
    ),
    Option(
        "ignore_filename_patterns",
        ("--ignore-filename-pattern",),
        "Regular expression of file paths to leave out (repeatable).",
        str,
        repeatable=True,
        kubeconform="-ignore-filename-pattern",
    ),
    Option(
        "output",
        ("-o", "--output"),
        "text, json, junit, tap, sarif or pretty.",
        str,
        "text",
        kubeconform="-output",
    ),
    Option(
        "summary",
        ("--summary",),
        "Print a summary line (text, json).",
        default=False,
        kubeconform="-summary",
    ),
    Option(
        "verbose",
        ("--verbose",),
        "Also report valid and skipped resources.",
        default=False,
        kubeconform="-verbose",
    ),
    Option("no_lint", ("--no-lint",), "Schema validation only, no lint rules.", default=False),
    Option(
        "engine",
        ("--engine",),
        "builtin, or kubeconform (a kubeconform binary on PATH).",
        str,
        "builtin",
    ),
    Option(
        "strict",
        ("--strict/--no-strict",),
        "Unknown fields and duplicate keys are errors (default: on; with kubeconform's "
        "flags, off unless -strict).",
        kubeconform="-strict",
    ),
    Option(
        "exit_on_error",
        ("--exit-on-error",),
        "Stop at the first resource that is invalid or in error.",
        default=False,
        kubeconform="-exit-on-error",
    ),
    Option(
        "jobs",
        ("--jobs",),
        "Worker processes (default: one per CPU for large inputs).",
        int,
        kubeconform="-n",
        minimum=1,
    ),
    Option(
        "kubeconform_defaults",
        (KUBECONFORM_DEFAULTS,),
        "kubeconform's meaning (set by its single-dash flags): not strict unless --strict, "
        "no lint, no name required, schema location 'default' only.",
        default=False,
    ),
)
# kubeconform's flags and gpustack's spelling of each.
KUBECONFORM_SWITCHES = {
    **{o.kubeconform: o.names[-1].split("/")[0] for o in OPTIONS if o.kubeconform and not o.value},
    "-h": "--help",
}
KUBECONFORM_VALUES = {o.kubeconform: o.names[-1] for o in OPTIONS if o.kubeconform and o.value}
_FALSE = {"false", "0", "f", "F", "FALSE", "False"}  # Go's strconv.ParseBool


def translate(args: list[str]) -> list[str]:
    """kubeconform's single-dash flags (`-flag`, `-flag value`, `-flag=value`, booleans also
    `-flag=false`) as gpustack's options, plus KUBECONFORM_DEFAULTS when any is used."""
    translated: list[str] = []
    kubeconform = False
    arguments = iter(args)
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if name in KUBECONFORM_SWITCHES:
            kubeconform = True
            if not equals or value not in _FALSE:
                translated.append(KUBECONFORM_SWITCHES[name])
            elif name == "-strict":
                translated.append("--no-strict")
        elif name in KUBECONFORM_VALUES:
            kubeconform = True
            translated.append(KUBECONFORM_VALUES[name])
            translated.append(value if equals else next(arguments, ""))
        else:
            translated.append(argument)
    return ([KUBECONFORM_DEFAULTS] if kubeconform else []) + translated


def typer_command() -> Callable[..., None]:
    """The command as typer declares it (help, shell completion, and the command lines `main`
    leaves to typer), made from OPTIONS."""
    # Deferred: a plain run of validate needs neither (start-up time of validate).
    import typer

    from gpustack.commands.common import handles_user_errors

    parameters = [
        inspect.Parameter(
            "paths",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=typer.Argument(None, metavar=PATHS_METAVAR, help=PATHS_HELP),
            annotation=list[str],
        )
    ]
    for option in OPTIONS:
        declared = typer.Option(option.default, *option.names, help=option.help, min=option.minimum)
        parameters.append(
            inspect.Parameter(
                option.parameter,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=declared,
                annotation=option.annotation,
            )
        )

    @handles_user_errors
    def command(**values: Any) -> None:
        """Validate Kubernetes manifests against strict schemas, offline; exit 1 if any is invalid."""
        raise typer.Exit(run(**values))

    command.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    return command


def main(arguments: list[str]) -> int | None:
    """`gpustack ARGUMENTS` when it is a run of `validate` (global flags before or after the
    command): its exit code. None for anything else (another command, help, a mistake on the
    command line), which the typer application then handles, with its messages."""
    head, tail = (arguments, []) if "--" not in arguments else _split(arguments)
    rest = [argument for argument in head if argument not in GLOBAL_FLAGS]
    debug = "--debug" in head
    if not rest or rest[0] != "validate" or set(head) & set(GLOBAL_FLAGS) - {"--debug"}:
        return None
    values = parse([*translate(rest[1:]), *tail])
    if values is None:
        return None
    try:
        return run(**values)
    except UserError as problem:
        if debug:
            raise
        for each in problem.every():
            _echo(f"error: {each}\n", err=True)
        return 2
    except KeyboardInterrupt:
        return 130


def _split(arguments: list[str]) -> tuple[list[str], list[str]]:
    at = arguments.index("--")
    return arguments[:at], arguments[at:]


def parse(arguments: list[str]) -> dict[str, Any] | None:
    """The arguments after `validate` (in gpustack's spelling) as the command's parameters,
    read as click reads them; None when they ask for help or are a mistake."""
    long: dict[str, tuple[Option, bool]] = {}
    for option in OPTIONS:
        for name in option.names:
            positive, _, negative = name.partition("/")
            long[positive] = (option, True)
            if negative:
                long[negative] = (option, False)
    short = {name: long.pop(name)[0] for name in list(long) if len(name) == 2}
    values: dict[str, Any] = {option.parameter: option.default for option in OPTIONS}
    paths: list[str] = []
    pending = list(reversed(arguments))
    while pending:
        argument = pending.pop()
        if argument == "--":
            paths.extend(reversed(pending))
            break
        if not argument.startswith("-") or argument == "-":
            paths.append(argument)
            continue
        name, equals, attached = argument.partition("=")
        if name in long:
            option, switch = long[name]
            if option.value is None:
                if equals:
                    return None  # click: the option does not take a value
                values[option.parameter] = switch
                continue
            if equals:
                pending.append(attached)
        elif argument[:2] in short:
            option = short[argument[:2]]  # click: `-ojson` is `-o json`
            if len(argument) > 2:
                pending.append(argument[2:])
        else:
            return None  # unknown, or -h/--help: typer says so
        if not pending:
            return None  # click: the option requires an argument
        value: Any = pending.pop()
        if option.value is int:
            try:
                value = int(value)
            except ValueError:
                return None
            if option.minimum is not None and value < option.minimum:
                return None
        if option.repeatable:
            values[option.parameter] = [*(values[option.parameter] or []), value]
        else:
            values[option.parameter] = value
    return {"paths": paths, **values}


_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def _echo(text: str, err: bool = False, color: bool | None = None) -> None:
    """click.echo's way: colour codes are left out unless on a terminal (or `color`)."""
    stream = sys.stderr if err else sys.stdout
    if not color and (color is False or not stream.isatty()):
        text = _ANSI.sub("", text)
    stream.write(text)
    stream.flush()


def run(
    paths: list[str] | None = None,
    kubernetes_version: str | None = None,
    schema_locations: list[str] | None = None,
    skip: list[str] | None = None,
    reject: list[str] | None = None,
    ignore_missing_schemas: bool = False,
    ignore_filename_patterns: list[str] | None = None,
    output: str = "text",
    summary: bool = False,
    verbose: bool = False,
    no_lint: bool = False,
    engine: str = "builtin",
    strict: bool | None = None,
    exit_on_error: bool = False,
    jobs: int | None = None,
    kubeconform_defaults: bool = False,
) -> int:
    """Validate; the exit code (0 valid, 1 invalid; UserError for a usage error)."""
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
    if kubeconform_defaults:
        # kubeconform's defaults: the newest Kubernetes ("master") and its default location.
        requested = None if kubernetes_version in (None, "master") else kubernetes_version
        version = (
            schemas.minor_version(requested) if requested else schemas.supported_versions()[-1]
        )
        locations = tuple(schema_locations or (schemas.DEFAULT,))
    else:
        version = schemas.minor_version(kubernetes_version or _default_version())
        locations = tuple(schema_locations or schemas.DEFAULT_LOCATIONS)
    schemas.store(version, locations)  # a bad template is a usage error before any work
    skipped, rejected = _kinds(skip), _kinds(reject)
    from gpustack.patterns import linear_regex

    ignored = [linear_regex(p, "--ignore-filename-pattern") for p in ignore_filename_patterns or []]
    targets = list(paths or ["-"])

    if engine == "kubeconform":
        return _run_kubeconform(
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
        )

    from gpustack.validation import engine as checks
    from gpustack.validation import manifests
    from gpustack.validation.validator import lint_results

    lint = not no_lint and not kubeconform_defaults
    settings = checks.Settings(
        version,
        locations,
        frozenset(skipped),
        frozenset(rejected),
        ignore_missing_schemas,
        strict=strict if strict is not None else not kubeconform_defaults,
        require_name=not kubeconform_defaults,
        keep_objects=lint,
    )
    files = [
        path
        for path in manifests.files(targets)
        if not any(pattern.search(path) for pattern in ignored)
    ]
    results = []
    shown = []
    checked = checks.check_files(files, settings, sys.stdin.buffer, jobs)
    for file, found in checked:
        shown.append(file)
        results.extend(found)
        if exit_on_error and any(result.status in ("invalid", "error") for result in found):
            checked.close()
            break
    checks.resolve_custom_resources(results, settings)
    if exit_on_error:
        failed = [n for n, result in enumerate(results) if result.status in ("invalid", "error")]
        results = results[: failed[0] + 1] if failed else results
    unplaced = lint_results(results, version) if lint else []
    outcome = report.Report(results, shown, unplaced, stdin_only=targets == ["-"])
    # pretty is coloured even into a pipe, as kubeconform's is.
    color = True if output == "pretty" else None
    _echo(report.render(outcome, output, summary, verbose), color=color)
    return 1 if outcome.failed else 0


def _default_version() -> str:
    """platform.kubernetesVersion of ./gpustack.yaml when there is one, else the newest known."""
    from gpustack.validation.schemas import supported_versions

    if Path("gpustack.yaml").is_file():  # what a bare `gpustack render` renders (fleet.py)
        # Only then the config model: validate alone needs neither it nor the renderer.
        from gpustack.config import load_stack
        from gpustack.fleet import DEFAULT_CONFIG

        return load_stack(DEFAULT_CONFIG, None, None).config.platform.kubernetesVersion
    return supported_versions()[-1]


def _kinds(values: list[str] | None) -> list[str]:
    return [kind.strip() for value in values or [] for kind in value.split(",") if kind.strip()]


def _run_kubeconform(
    targets: list[str],
    version: str,
    locations: tuple[str, ...],
    output: str,
    summary: bool,
    verbose: bool,
    skip: list[str],
    reject: list[str],
    ignore_missing_schemas: bool,
    ignore_filename_patterns: list[str],
) -> int:
    from gpustack.validation import kubeconform

    if output == "sarif":
        _echo("error: kubeconform has no sarif output; use --engine builtin for sarif\n", err=True)
        return 2
    binary = kubeconform.find()
    if binary is None:
        _echo(
            "error: --engine kubeconform: no kubeconform binary on PATH "
            "(install kubeconform, or use the builtin engine, which needs nothing else)\n",
            err=True,
        )
        return 2
    argv = kubeconform.command_line(
        binary,
        targets,
        version,
        locations,
        output,
        summary,
        verbose,
        skip,
        reject,
        ignore_missing_schemas,
        ignore_filename_patterns,
    )
    stdin = sys.stdin.buffer.read() if "-" in targets else None
    return kubeconform.run(argv, stdin)
