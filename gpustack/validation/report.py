"""Validation results as text, json, junit, tap or sarif.

text, json, junit and tap follow kubeconform's formats (so tools that read kubeconform's output
read gpustack's); sarif 2.1.0 is for code-scanning dashboards. Lint findings appear in every
format beside the schema verdicts. Output is deterministic: no timestamps, no durations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any
from xml.etree import ElementTree

from gpustack import __version__, emit
from gpustack.errors import one_line
from gpustack.findings import Finding
from gpustack.objects import namespaced
from gpustack.redaction import mask_text
from gpustack.validation.verdicts import (
    MANIFEST,
    SCHEMA,
    Result,
    describe,
    explain,
    located,
)

FORMATS = ("text", "json", "junit", "tap", "sarif", "pretty")
_KUBECONFORM_STATUS = {
    "valid": "statusValid",
    "invalid": "statusInvalid",
    "error": "statusError",
    "skipped": "statusSkipped",
}


@dataclass
class Report:
    results: list[Result]
    files: list[str]  # every file read, in order (empty ones too)
    unplaced: list[Finding] = field(default_factory=list)  # lint findings about no one resource
    stdin_only: bool = False

    def count(self, status: str) -> int:
        return sum(1 for result in self.results if result.status == status)

    @property
    def failed(self) -> bool:
        return bool(self.count("invalid") or self.count("error")) or any(
            finding.severity == "error" for finding in self.unplaced
        )


def formatted(
    report: Report, output_format: str, summary: bool = False, verbose: bool = False
) -> str:
    """The report in the format `validate --output` names, every secret in it redacted."""
    report = _masked(report)
    writers: dict[str, Callable[[Report, bool, bool], str]] = {
        "text": text,
        "json": json_,
        "junit": junit,
        "tap": tap,
        "sarif": sarif,
        "pretty": pretty,
    }
    return writers[output_format](report, summary, verbose)


def _masked(report: Report) -> Report:
    """`report` with every secret in a finding's message redacted (gpustack.redaction)."""

    def masked(findings: list[Finding]) -> list[Finding]:
        return [replace(finding, message=mask_text(finding.message)) for finding in findings]

    results = [
        replace(result, findings=masked(result.findings)) if result.findings else result
        for result in report.results
    ]
    return replace(report, results=results, unplaced=masked(report.unplaced))


def _warnings(result: Result) -> list[Finding]:
    return [finding for finding in result.findings if finding.severity == "warning"]


def summary_line(report: Report) -> str:
    """kubeconform's summary, word for word."""
    resources = len(report.results)
    files = len(dict.fromkeys(report.files))
    found = "parsing stdin" if report.stdin_only else f"in {files} file{'s' if files > 1 else ''}"
    return (
        f"Summary: {resources} resource{'s' if resources > 1 else ''} found {found} - "
        f"Valid: {report.count('valid')}, Invalid: {report.count('invalid')}, "
        f"Errors: {report.count('error')}, Skipped: {report.count('skipped')}"
    )


def text(report: Report, summary: bool, verbose: bool) -> str:
    lines = []
    for result in report.results:
        file, kind, name = result.resource.file, result.kind, result.name
        if result.status == "valid" and verbose:
            lines.append(f"{file} - {kind} {name} is valid")
        elif result.status == "invalid":
            lines.append(f"{file} - {kind} {name} is invalid: {result.message}")
        elif result.status == "error":
            subject = f"{kind} {name} " if kind and name else ""
            lines.append(f"{file} - {subject}failed validation: {result.message}")
        elif result.status == "skipped" and verbose:
            lines.append(f"{file} - {name} {kind} skipped")  # kubeconform's word order
        for finding in _warnings(result):
            lines.append(f"{file} - {kind} {name} has a warning: {located(finding)}")
    for finding in report.unplaced:
        lines.append(f"{finding.severity}: {describe(finding)}")
    if summary:
        lines.append(summary_line(report))
    # A line each: a file's name, a resource's name and a message can hold what a pull request
    # chose (a line break would print a line of its own in the CI log).
    return "".join(one_line(line) + "\n" for line in lines)


# aurora's colours, as kubeconform's pretty output writes them (always, even to a pipe).
_GREEN, _RED, _YELLOW, _RESET = "\x1b[92m", "\x1b[91m", "\x1b[33m", "\x1b[0m"


def pretty(report: Report, summary: bool, verbose: bool) -> str:
    """kubeconform's pretty output (yannh/kubeconform pkg/output/pretty.go): coloured marks,
    invalid resources as in text."""
    lines = []
    for result in report.results:
        # One line each, as in text (the colours are the only escapes).
        file, kind, name, message = (
            one_line(part)
            for part in (result.resource.file, result.kind, result.name, result.message)
        )
        if result.status == "valid" and verbose:
            lines.append(f"{_GREEN}\u2714{_RESET} {file}: {_GREEN}{kind} {name} is valid{_RESET}")
        elif result.status == "invalid":
            lines.append(f"{file} - {kind} {name} is invalid: {message}")
        elif result.status == "error":
            what = (
                f"{kind} failed validation: {name}"
                if kind and name
                else (f"failed validation: {name}")
            )
            lines.append(f"{_RED}\u2716{_RESET} {file}: {_RED}{what} {message}{_RESET}")
        elif result.status == "skipped" and verbose:
            what = (
                f"{kind} {name} skipped"
                if kind and name
                else (f"{kind} skipped" if kind else "skipped")
            )
            lines.append(f"{_YELLOW}-{_RESET} {file}: {_YELLOW}{what}{_RESET}")
        for finding in _warnings(result):
            lines.append(f"{file} - {kind} {name} has a warning: {one_line(located(finding))}")
    for finding in report.unplaced:
        lines.append(f"{finding.severity}: {one_line(describe(finding))}")
    if summary:
        lines.append(summary_line(report))
    return "".join(line + "\n" for line in lines)


def json_(report: Report, summary: bool, verbose: bool) -> str:
    resources = []
    for result in report.results:
        if result.status in ("valid", "skipped") and not verbose and not result.findings:
            continue
        entry: dict[str, Any] = {
            "filename": result.resource.file,
            "kind": result.kind,
            "name": result.name,
            "version": result.api_version,
            "status": _KUBECONFORM_STATUS[result.status],
            "msg": result.message,
        }
        schema_errors = [f for f in result.findings if f.rule == SCHEMA]
        if schema_errors:
            pointers = result.pointers + [""] * (len(schema_errors) - len(result.pointers))
            entry["validationErrors"] = [
                {"path": pointer, "msg": finding.message}
                for finding, pointer in zip(schema_errors, pointers)
            ]
        if result.findings:
            entry["findings"] = [finding.as_dict() for finding in result.findings]
        resources.append(entry)
    document: dict[str, Any] = {"resources": resources}
    if report.unplaced:
        document["findings"] = [finding.as_dict() for finding in report.unplaced]
    if summary:
        document["summary"] = {
            "valid": report.count("valid"),
            "invalid": report.count("invalid"),
            "errors": report.count("error"),
            "skipped": report.count("skipped"),
        }
    return json.dumps(document, indent=2) + "\n"


def junit(report: Report, summary: bool, verbose: bool) -> str:
    """JUnit XML as Jenkins and GitLab read it: a testsuite per file, a testcase per resource."""
    root = ElementTree.Element(
        "testsuites",
        {
            "name": "gpustack",
            "tests": str(len(report.results)),
            "failures": str(report.count("invalid")),
            "errors": str(report.count("error")),
            "disabled": str(report.count("skipped")),
            "time": "0",
        },
    )
    suites: dict[str, list[Result]] = {}
    for result in report.results:
        suites.setdefault(result.resource.file, []).append(result)
    if report.unplaced:
        suites.setdefault("lint", [])
    for number, (file, results) in enumerate(suites.items(), start=1):
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            {
                "name": file,
                "id": str(number),
                "tests": str(len(results)),
                "failures": str(sum(r.status == "invalid" for r in results)),
                "errors": str(sum(r.status == "error" for r in results)),
                "disabled": "0",
                "skipped": str(sum(r.status == "skipped" for r in results)),
                "time": "0",
            },
        )
        for result in results:
            name = namespaced(result.namespace, result.name)
            case = ElementTree.SubElement(
                suite,
                "testcase",
                {
                    "name": name or f"line {result.resource.line}",
                    "classname": f"{result.kind}@{result.api_version}" if result.kind else "",
                    "time": "0",
                },
            )
            errors = [f for f in result.findings if f.severity == "error"]
            if result.status == "invalid":
                failure = ElementTree.SubElement(
                    case, "failure", {"message": result.message, "type": errors[0].rule}
                )
                failure.text = "\n".join(_located(f) for f in errors)
            elif result.status == "error":
                ElementTree.SubElement(case, "error", {"message": result.message, "type": MANIFEST})
            elif result.status == "skipped":
                ElementTree.SubElement(case, "skipped", {"message": "kind skipped"})
            if _warnings(result):
                out = ElementTree.SubElement(case, "system-out")
                out.text = "\n".join("warning: " + _located(f) for f in _warnings(result))
        if file == "lint" and report.unplaced:
            out = ElementTree.SubElement(suite, "system-out")
            out.text = "\n".join(f"{f.severity}: {describe(f)}" for f in report.unplaced)
    ElementTree.indent(root, "  ")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + ElementTree.tostring(root, encoding="unicode")
        + "\n"
    )


def _located(finding: Finding) -> str:
    where = ""
    if finding.file and finding.line:
        where = f"{finding.file}:{finding.line}:{finding.column or 1}: "
    return where + describe(finding)


def tap(report: Report, summary: bool, verbose: bool) -> str:
    """TAP version 13; findings as a YAML diagnostic block under their test line."""
    lines = ["TAP version 13"]
    for number, result in enumerate(report.results, start=1):
        file = result.resource.file
        qualified = f"{result.api_version}/{result.kind}/{result.namespace}/{result.name}"
        if result.status == "valid":
            lines.append(f"ok {number} - {file} ({qualified})")
        elif result.status == "invalid":
            lines.append(f"not ok {number} - {file} ({qualified}): {result.message}")
        elif result.status == "error":
            lines.append(f"not ok {number} - {file}: {result.message}")
        else:
            lines.append(f"ok {number} - {file} ({qualified}) # skip")
        if result.findings:
            block = emit.dump({"findings": [_diagnostic(f) for f in result.findings]})
            lines.append("  ---")
            lines.extend("  " + line for line in block.splitlines())
            lines.append("  ...")
    for number, finding in enumerate(report.unplaced, start=len(report.results) + 1):
        verdict = "not ok" if finding.severity == "error" else "ok"
        lines.append(f"{verdict} {number} - lint: {describe(finding)}")
    lines.append(f"1..{len(report.results) + len(report.unplaced)}")
    return "".join(line + "\n" for line in lines)


def _diagnostic(finding: Finding) -> dict[str, Any]:
    return {
        key: value
        for key, value in finding.as_dict().items()
        if value is not None and key != "object"
    }


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_RULE_TEXT = {
    SCHEMA: "The object does not match the JSON Schema of its kind and apiVersion.",
    MANIFEST: "The manifest could not be read or checked (syntax, missing kind, unknown kind).",
}


def sarif(report: Report, summary: bool, verbose: bool) -> str:
    """SARIF 2.1.0: one run, a rule per finding rule id, a result per finding."""
    from gpustack.validation.lint import RULES  # `validate --no-lint` loads no rules

    findings = [f for result in report.results for f in result.findings] + report.unplaced
    # Every rule gpustack can report, so code-scanning tools show the catalogue and its fixes.
    described: dict[str, dict[str, Any]] = {
        rule: {"id": rule, "shortDescription": {"text": text}} for rule, text in _RULE_TEXT.items()
    }
    for lint_rule in RULES:
        described[lint_rule.id] = {
            "id": lint_rule.id,
            "shortDescription": {"text": lint_rule.description},
            "help": {"text": lint_rule.fix},
            "defaultConfiguration": {"level": lint_rule.severity},
        }
    rule_ids = sorted(described.keys() | {finding.rule for finding in findings})
    rules = [
        described.get(rule, {"id": rule, "shortDescription": {"text": rule}}) for rule in rule_ids
    ]
    results = []
    for finding in findings:
        entry: dict[str, Any] = {
            "ruleId": finding.rule,
            "ruleIndex": rule_ids.index(finding.rule),
            "level": finding.severity,
            "message": {"text": explain(finding)},
        }
        if finding.file:
            entry["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(finding.file)},
                        "region": {
                            "startLine": finding.line or 1,
                            "startColumn": finding.column or 1,
                        },
                    }
                }
            ]
        results.append(entry)
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpustack",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _uri(file: str) -> str:
    """SARIF wants URIs: relative paths as they are, absolute ones as file: URIs."""
    path = PurePath(file)
    return path.as_uri() if path.is_absolute() else path.as_posix()
