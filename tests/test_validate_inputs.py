"""Bad input gets a per-resource error and the run goes on; bad options exit 2."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree

import pytest
from validate_helpers import CORPUS, CRD_OBJECTS

GOOD = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  key: value\n"
BAD_FILES = {
    "binary.yaml": b"\x00\x01\x02\x03 binary",
    "latin1.yaml": "kind: ConfigMap\nmetadata:\n  name: caf\xe9\n".encode("latin-1"),
    "unparsable.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [}\n",
    "scalar.yaml": b"just a string\n",
    "old-api.yaml": b"apiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata:\n  name: old\n",
    "unknown-kind.yaml": b"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
}
MESSAGES = {
    "binary.yaml": "binary file (contains NUL bytes), expected YAML",
    "latin1.yaml": "not valid UTF-8 (byte 0xe9) (line 3, column 12)",
    "unparsable.yaml": "invalid YAML",
    "scalar.yaml": "document is a scalar, expected a Kubernetes object (line 1, column 1)",
    "old-api.yaml": "could not find schema for DaemonSet (apiVersion extensions/v1beta1)",
    "unknown-kind.yaml": "could not find schema for Widget (apiVersion example.com/v1)",
    "unreadable.yaml": "file not found",
}


@pytest.fixture
def folder(tmp_path):
    """A folder of bad files with one good file after them (z-good.yaml sorts last)."""
    for name, content in BAD_FILES.items():
        (tmp_path / name).write_bytes(content)
    (tmp_path / "unreadable.yaml").symlink_to(tmp_path / "gone")  # a link to nothing
    (tmp_path / "notes.txt").write_text("not a manifest, not walked")
    (tmp_path / "z-good.yaml").write_text(GOOD)
    return tmp_path


def test_each_bad_file_is_an_error_and_the_run_goes_on(cli, folder):
    result = cli("validate", "--summary", folder)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    for name, message in MESSAGES.items():
        matching = [line for line in lines if line.startswith(f"{folder / name} - ")]
        assert len(matching) == 1, (name, lines)
        assert "failed validation: " + message in matching[0]
    assert lines[-1] == (
        "Summary: 8 resources found in 8 files - Valid: 1, Invalid: 0, Errors: 7, Skipped: 0"
    )


@pytest.mark.parametrize("output", ["json", "junit", "tap", "sarif"])
def test_each_bad_file_is_reported_in_every_format(cli, folder, output):
    result = cli("validate", "-o", output, "--summary", "--no-lint", folder)
    assert result.exit_code == 1
    text = result.stdout
    if output == "json":
        errors = {
            entry["filename"].rpartition("/")[2]: entry["msg"]
            for entry in json.loads(text)["resources"]
            if entry["status"] == "statusError"
        }
    elif output == "junit":
        errors = {
            suite.get("name").rpartition("/")[2]: case.find("error").get("message")
            for suite in ElementTree.fromstring(text).iter("testsuite")
            for case in suite.iter("testcase")
            if case.find("error") is not None
        }
    elif output == "tap":
        errors = {
            match[1].rpartition("/")[2]: match[2]
            for match in re.finditer(r"^not ok \d+ - (\S+): (.*)$", text, re.MULTILINE)
        }
    else:
        errors = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rpartition("/")[2]: r[
                "message"
            ]["text"]
            for r in json.loads(text)["runs"][0]["results"]
        }
    assert set(errors) == set(MESSAGES)
    for name, message in MESSAGES.items():
        assert message.split(" (line")[0] in errors[name]


def test_stdin_is_read_with_a_dash_or_no_path(cli):
    two = GOOD + "---\n" + GOOD.replace("good", "other")
    for args in (["-"], []):
        result = cli("validate", "--summary", *args, input=two)
        assert result.exit_code == 0, result.output
        assert result.stdout == (
            "Summary: 2 resources found parsing stdin - "
            "Valid: 2, Invalid: 0, Errors: 0, Skipped: 0\n"
        )
    result = cli(
        "validate",
        "-",
        input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n",
    )
    assert result.exit_code == 1
    assert result.stdout.startswith("stdin - ConfigMap x is invalid: data.a: 1 is not of types")


def test_json_manifests_and_lists_are_split_into_items(cli, tmp_path):
    manifest = tmp_path / "list.json"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {"name": "b"},
                        "spec": {"ports": [{"port": 80}], "bogus": True},
                    },
                ],
            },
            indent="\t",
        )
    )
    result = cli("validate", "--summary", manifest)
    assert result.stdout.splitlines() == [
        f"{manifest} - Service b is invalid: spec: Additional properties are not allowed "
        "('bogus' was unexpected) (line 24, column 5)",  # the unknown key itself
        "Summary: 2 resources found in 1 file - Valid: 1, Invalid: 1, Errors: 0, Skipped: 0",
    ]


def test_duplicate_keys_are_an_error_naming_the_object_line_and_column(cli):
    result = cli("validate", CORPUS / "duplicate-key.yaml")
    assert result.exit_code == 1
    # The object is named as Kubernetes reads it: the last of the duplicates wins.
    assert result.stdout == (
        "tests/data/validate/corpus/duplicate-key.yaml - ConfigMap two failed "
        "validation: duplicate key 'name' (line 7, column 3)\n"
    )


def test_skip_reject_and_ignore_missing_schemas(cli):
    valid, unknown = CORPUS / "valid.yaml", CORPUS / "unknown-kind.yaml"
    skipped = cli(
        "validate", "--summary", "--verbose", "--skip", "Service,apps/v1/Deployment", valid
    )
    assert skipped.exit_code == 0
    assert skipped.stdout.splitlines() == [
        "tests/data/validate/corpus/valid.yaml - web Deployment skipped",
        "tests/data/validate/corpus/valid.yaml - web Service skipped",
        "Summary: 2 resources found in 1 file - Valid: 0, Invalid: 0, Errors: 0, Skipped: 2",
    ]
    rejected = cli("validate", "--reject", "Service", valid)
    assert rejected.exit_code == 1
    assert rejected.stdout == (
        "tests/data/validate/corpus/valid.yaml - Service web failed "
        "validation: prohibited resource kind Service (line 21, column 1)\n"
    )
    assert cli("validate", unknown).exit_code == 1
    ignored = cli("validate", "--summary", "--ignore-missing-schemas", unknown)
    assert ignored.exit_code == 0
    assert "Skipped: 1" in ignored.stdout


def test_ignore_filename_pattern_leaves_files_out(cli):
    result = cli(
        "validate",
        "--summary",
        "--no-lint",
        "--ignore-filename-pattern",
        "wrong|unknown|missing|broken|invalid|duplicate|not-an|list",
        CORPUS,
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Summary: 3 resources found in 3 files - Valid: 3")


def test_schema_locations_are_tried_in_order(cli, tmp_path):
    crd = CORPUS / "crd-valid.yaml"
    # Without the project's schemas the ServiceMonitor has no schema...
    result = cli("validate", "--schema-location", "default", crd)
    assert "could not find schema for ServiceMonitor" in result.stdout
    # ...a kubernetes-json-schema style folder (no .json suffix) is searched in its layout...
    tree = tmp_path / "v1.31.0-standalone-strict"
    tree.mkdir()
    (tree / "servicemonitor-monitoring-v1.json").write_text(
        json.dumps({"type": "object", "properties": {"spec": {"required": ["jobLabel"]}}})
    )
    result = cli(
        "validate", "--no-lint", "--kubernetes-version", "1.31", "--schema-location", tmp_path, crd
    )
    assert result.exit_code == 1
    assert 'spec: "jobLabel" is a required property' in result.stdout
    # ...and the first location that has the kind wins.
    result = cli(
        "validate", "--no-lint", "--schema-location", "gpustack", "--schema-location", tmp_path, crd
    )
    assert result.exit_code == 0, result.output


def test_a_broken_schema_file_is_an_error_for_its_resources_only(cli, tmp_path):
    (tmp_path / "monitoring.coreos.com").mkdir()
    (tmp_path / "monitoring.coreos.com" / "servicemonitor_v1.json").write_text("{not json")
    template = f"{tmp_path}/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json"
    result = cli(
        "validate",
        "--summary",
        "--schema-location",
        "default",
        "--schema-location",
        template,
        CORPUS / "crd-valid.yaml",
        CORPUS / "valid.yaml",
    )
    assert result.exit_code == 1
    assert "ServiceMonitor exporter failed validation: cannot read schema" in result.stdout
    assert "Valid: 2, Invalid: 0, Errors: 1" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["-o", "yaml"], "--output: unknown output format 'yaml'"),
        (["--engine", "kubeval"], "--engine: unknown engine 'kubeval'"),
        (["--schema-location", "schemas/{{ .Foo }}.json"], "cannot evaluate {{.Foo}}"),
        (["--schema-location", "schemas/{{ .Group }/x.json"], "unclosed"),
        (["--schema-location", "https://example.com/{{.ResourceKind}}.json"], "validates offline"),
        (["--kubernetes-version", "1.12"], "Kubernetes version '1.12' is not supported"),
        (["--kubernetes-version", "latest"], "Kubernetes version 'latest' is not supported"),
        (["--ignore-filename-pattern", "("], "bad regular expression"),
    ],
)
def test_usage_errors_exit_2_before_reading_anything(cli, args, message):
    result = cli("validate", *args, CORPUS / "valid.yaml")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stdout == ""


def test_kubernetes_version_defaults_to_the_config_in_the_working_directory(
    cli, tmp_path, monkeypatch
):
    # FlowSchema flowcontrol.apiserver.k8s.io/v1beta3 is served up to 1.31 and gone in 1.32.
    manifest = tmp_path / "flowschema.yaml"
    manifest.write_text(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\n"
        "metadata:\n  name: f\nspec:\n  priorityLevelConfiguration:\n"
        "    name: global-default\n"
    )
    monkeypatch.chdir(tmp_path)
    assert cli("validate", manifest).exit_code == 1  # the newest version: no such API
    (tmp_path / "gpustack.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata:\n  name: lab\n"
        'platform:\n  profile: kubeadm\n  kubernetesVersion: "1.31"\n'
    )
    assert cli("validate", manifest).exit_code == 0


def test_lint_findings_appear_in_every_format_and_no_lint_turns_them_off(cli, monkeypatch):
    from gpustack.findings import Finding
    from gpustack.validation import lint

    def fake_run(objects, kubernetes_version=None):
        # The lint rules are written elsewhere; this stand-in reports what a rule would.
        return [
            Finding(
                "taints-tolerated",
                "error",
                "does not tolerate nvidia.com/gpu",
                object=("apps", "Deployment", "demo", "web"),
                field="spec.template.spec.tolerations",
            ),
            Finding(
                "images-pinned",
                "warning",
                "pin the image by digest",
                object=("", "Service", "demo", "web"),
            ),
        ]

    monkeypatch.setattr(lint, "run", fake_run)
    valid = CORPUS / "valid.yaml"
    text = cli("validate", "--summary", valid)
    assert text.exit_code == 1
    assert text.stdout.splitlines() == [
        "tests/data/validate/corpus/valid.yaml - Deployment web is invalid: [taints-tolerated] "
        "spec.template.spec.tolerations: does not tolerate nvidia.com/gpu (line 15, column 7)",
        "tests/data/validate/corpus/valid.yaml - Service web has a warning: [images-pinned] "
        "pin the image by digest (line 21, column 1)",
        "Summary: 2 resources found in 1 file - Valid: 1, Invalid: 1, Errors: 0, Skipped: 0",
    ]
    for output in ("json", "junit", "tap", "sarif"):
        result = cli("validate", "-o", output, valid)
        assert result.exit_code == 1
        assert "taints-tolerated" in result.stdout and "images-pinned" in result.stdout, output
    sarif = json.loads(cli("validate", "-o", "sarif", valid).stdout)
    levels = {r["ruleId"]: r["level"] for r in sarif["runs"][0]["results"]}
    assert levels == {"taints-tolerated": "error", "images-pinned": "warning"}
    unlinted = cli("validate", "--no-lint", valid)
    assert unlinted.exit_code == 0 and unlinted.stdout == ""


def test_project_crd_objects_validate(cli):
    # Samples of single custom resources: schema checks only, lint would miss their targets.
    result = cli("validate", "--summary", "--no-lint", CRD_OBJECTS)
    assert result.exit_code == 0, result.output
    assert "Valid: 18, Invalid: 0, Errors: 0" in result.stdout


def test_the_real_command_reads_a_pipe():
    import subprocess
    import sys

    from conftest import ROOT

    completed = subprocess.run(
        [sys.executable, "-m", "gpustack", "validate", "--summary"],
        input=(GOOD + "---\n" + GOOD.replace("key: value", "key: 7")).encode(),
        capture_output=True,
        cwd=ROOT,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.decode().splitlines() == [
        'stdin - ConfigMap good is invalid: data.key: 7 is not of types "null", "string"; '
        'Kubernetes reads the unquoted `7` so: quote it ("7") (line 13, column 8)',
        "Summary: 2 resources found parsing stdin - Valid: 1, Invalid: 1, Errors: 0, Skipped: 0",
    ]


@pytest.mark.parametrize(
    ("manifest", "suggestion"),
    [
        # A core kind: the schema's definitions come from the registry ($ref into $defs).
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n"
            "    resoures: {limits: {nvidia.com/gpu: 1}}\n",
            "('resoures' was unexpected); did you mean 'resources'? (line 8, column 5)",
        ),
        # A custom resource of the project's CRD schemas.
        (
            "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\n"
            "metadata: {name: m, namespace: gpu}\nspec:\n  selector: {}\n"
            "  endpoints:\n  - {port: metrics, intervall: 15s}\n",
            "('intervall' was unexpected); did you mean 'interval'? (line 7, column 21)",
        ),
        # Nothing close: no suggestion is made up.
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, zzzzzz: 1}\n",
            "('zzzzzz' was unexpected) (line 3, column 21)",
        ),
    ],
)
def test_a_misspelled_field_gets_the_field_it_meant(cli, tmp_path, manifest, suggestion):
    """As `render` does for a config's typo, `validate` names the field a manifest's typo meant."""
    path = tmp_path / "typo.yaml"
    path.write_text(manifest)
    result = cli("validate", "--no-lint", path)
    assert result.exit_code == 1
    assert suggestion in result.stdout
