"""`--engine kubeconform`.

No kubeconform binary is installed here (nor packaged on PyPI), so these tests check our side of
the contract: the message and exit code when it is missing, and, with a stand-in `kubeconform`
script that records its argv, the command line gpustack would run. They do not show that
kubeconform agrees with gpustack; tests/test_validate_verdicts.py holds the known verdicts.
"""

from __future__ import annotations

import json
import os
import sys

from conftest import run_gpustack
from validate_helpers import CORPUS

from gpustack.validation import kubeconform, manifests
from gpustack.validation.schemas import project_template

RECORDER = """#!{python}
import json, sys
with open({log!r}, "w") as log:
    json.dump({{"argv": sys.argv[1:], "stdin": sys.stdin.read()}}, log)
print("Summary: 1 resource found in 1 file - Valid: 1, Invalid: 0, Errors: 0, Skipped: 0")
sys.exit(3)
"""


def test_missing_binary_is_said_plainly_and_exits_2(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no kubeconform on it
    result = cli("validate", "--engine", "kubeconform", CORPUS / "valid.yaml")
    assert result.exit_code == 2
    assert "no kubeconform binary on PATH" in result.stderr
    assert result.stdout == ""


def stand_in(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "argv.json"
    script = folder / "kubeconform"
    script.write_text(RECORDER.format(python=sys.executable, log=str(log)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def test_command_line_uses_kubeconforms_flags_and_the_project_schemas(cli, tmp_path, monkeypatch):
    log = stand_in(tmp_path, monkeypatch)
    manifest = CORPUS / "valid.yaml"
    result = cli(
        "validate",
        "--engine",
        "kubeconform",
        "--kubernetes-version",
        "1.30",
        "-o",
        "junit",
        "--summary",
        "--verbose",
        "--skip",
        "Secret",
        "--skip",
        "Job",
        "--reject",
        "Pod",
        "--ignore-missing-schemas",
        manifest,
    )
    assert result.exit_code == 3  # kubeconform's own exit code is passed through
    assert result.stdout.startswith("Summary: 1 resource found")  # and its report
    assert json.loads(log.read_text())["argv"] == [
        "-strict",
        "-kubernetes-version",
        "1.30.0",
        "-output",
        "junit",
        "-schema-location",
        "default",
        "-schema-location",
        project_template(),
        "-summary",
        "-verbose",
        "-skip",
        "Secret,Job",
        "-reject",
        "Pod",
        "-ignore-missing-schemas",
        str(manifest),
    ]
    assert project_template().endswith(
        "schemas/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
    )


def test_schema_locations_pass_through_and_stdin_is_forwarded(cli, tmp_path, monkeypatch):
    log = stand_in(tmp_path, monkeypatch)
    template = "crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
    cli(
        "validate",
        "--engine",
        "kubeconform",
        "--kubernetes-version",
        "1.31",
        "--schema-location",
        template,
        "--schema-location",
        "gpustack",
        input="kind: X\n",
    )
    recorded = json.loads(log.read_text())
    assert recorded["argv"] == [
        "-strict",
        "-kubernetes-version",
        "1.31.0",
        "-output",
        "text",
        "-schema-location",
        template,
        "-schema-location",
        project_template(),
        "-",
    ]
    assert recorded["stdin"] == "kind: X\n"


def test_sarif_is_refused_for_kubeconform(cli, tmp_path, monkeypatch):
    log = stand_in(tmp_path, monkeypatch)
    result = cli("validate", "--engine", "kubeconform", "-o", "sarif", CORPUS / "valid.yaml")
    assert result.exit_code == 2
    assert "kubeconform has no sarif output" in result.stderr
    assert not log.exists()


def test_kubeconforms_flags_pass_through_as_given(cli, tmp_path, monkeypatch):
    log = stand_in(tmp_path, monkeypatch)
    manifest = str(CORPUS / "valid.yaml")
    # kubeconform's spelling keeps gpustack's strict default (the binary gets -strict, as with
    # --summary), and -exit-on-error and -n are kept.
    result = cli(
        "validate", "--engine", "kubeconform", "-summary", "-exit-on-error", "-n", "3", manifest
    )
    argv = json.loads(log.read_text())["argv"]
    assert argv[0] == "-strict"
    assert argv[-5:] == ["-summary", "-exit-on-error", "-n", "3", manifest]
    assert "strict unless -strict=false" in result.stderr
    cli("validate", "--engine", "kubeconform", "--summary", manifest)
    assert json.loads(log.read_text())["argv"][0] == "-strict"
    cli("validate", "--engine", "kubeconform", "-strict=false", manifest)
    assert "-strict" not in json.loads(log.read_text())["argv"]
    cli("validate", "--engine", "kubeconform", "--no-strict", manifest)
    assert "-strict" not in json.loads(log.read_text())["argv"]


def test_a_kubernetes_version_flag_without_a_value_is_refused(tmp_path):
    for words in (["-kubernetes-version"], ["-kubernetes-version="], ["--kubernetes-version="]):
        result = run_gpustack("validate", *words, "-", cwd=tmp_path, input="")
        assert result.returncode == 2, words
        assert result.stdout == ""
    result = run_gpustack("validate", "-kubernetes-version", cwd=tmp_path, input="")
    assert "Option '--kubernetes-version' requires an argument" in result.stderr
    result = run_gpustack("validate", "-kubernetes-version=", cwd=tmp_path, input="")
    assert result.stderr.startswith("error: --kubernetes-version: Kubernetes version '' is not ")


def test_stdin_for_kubeconform_is_capped_as_for_the_builtin_engine(cli, tmp_path, monkeypatch):
    log = stand_in(tmp_path, monkeypatch)
    monkeypatch.setattr(kubeconform, "MAX_MANIFEST_BYTES", 1000)
    monkeypatch.setattr(manifests, "MAX_MANIFEST_BYTES", 1000)
    at_the_limit = "#" * 999 + "\n"
    result = cli("validate", "--engine", "kubeconform", input=at_the_limit)
    assert json.loads(log.read_text())["stdin"] == at_the_limit
    log.unlink()
    result = cli("validate", "--engine", "kubeconform", input=at_the_limit + "x")
    assert (result.exit_code, result.stderr) == (2, "error: more than 1000 bytes on stdin\n")
    # The builtin engine says the same of the same input.
    result = cli("validate", input=at_the_limit + "x")
    assert "more than 1000 bytes on stdin" in result.stdout
