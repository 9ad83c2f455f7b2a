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

from validate_helpers import CORPUS

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
