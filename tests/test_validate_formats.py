"""Every output format parses and says the same thing: which resources are valid, invalid, in error.

JUnit is checked against the shape Jenkins' junit schema gives (testsuites > testsuite > testcase
with failure/error/skipped), SARIF against the properties the SARIF 2.1.0 schema requires.
"""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree

import pytest
from validate_helpers import CORPUS

FILES = [
    CORPUS / "valid.yaml",
    CORPUS / "wrong-type.yaml",
    CORPUS / "unknown-kind.yaml",
    CORPUS / "multi-with-broken.yaml",
    CORPUS / "list.yaml",
]
# valid.yaml: 2 valid; wrong-type: 1 invalid; unknown-kind: 1 error;
# multi-with-broken: valid, error, valid; list: valid, invalid.
COUNTS = {"valid": 5, "invalid": 2, "error": 2, "skipped": 0}


def run(cli, *args):
    result = cli("validate", "--kubernetes-version", "1.31", *args, *FILES)
    assert result.exit_code == 1, result.output  # something is invalid
    return result.stdout


def test_text_is_kubeconform_lines_and_summary(cli):
    lines = run(cli, "--summary").splitlines()
    assert (
        "tests/data/validate/corpus/wrong-type.yaml - Deployment web is invalid: "
        'spec.replicas: "3" is not of types "null", "integer" (line 7, column 13)' in lines
    )
    assert any(
        re.fullmatch(
            r"tests/data/validate/corpus/unknown-kind\.yaml - Widget w failed "
            r"validation: could not find schema for Widget.*",
            line,
        )
        for line in lines
    )
    assert lines[-1] == (
        "Summary: 9 resources found in 5 files - Valid: 5, Invalid: 2, Errors: 2, Skipped: 0"
    )
    assert not any(line.endswith("is valid") for line in lines)


def test_text_verbose_also_lists_valid_resources(cli):
    lines = run(cli, "--verbose").splitlines()
    assert "tests/data/validate/corpus/valid.yaml - Service web is valid" in lines
    assert sum(line.endswith(" is valid") for line in lines) == COUNTS["valid"]


def test_json_has_kubeconforms_shape(cli):
    document = json.loads(run(cli, "-o", "json", "--summary"))
    assert document["summary"] == {"valid": 5, "invalid": 2, "errors": 2, "skipped": 0}
    statuses = [entry["status"] for entry in document["resources"]]
    assert sorted(statuses) == ["statusError"] * 2 + ["statusInvalid"] * 2  # valid ones left out
    for entry in document["resources"]:
        assert set(entry) >= {"filename", "kind", "name", "version", "status", "msg"}
        assert entry["msg"]
    invalid = next(e for e in document["resources"] if e["name"] == "web")
    assert invalid["validationErrors"] == [
        {"path": "/spec/replicas", "msg": '"3" is not of types "null", "integer"'}
    ]


def test_json_without_summary_has_only_resources(cli):
    assert list(json.loads(run(cli, "-o", "json"))) == ["resources"]


def test_junit_has_the_jenkins_junit_shape(cli):
    root = ElementTree.fromstring(run(cli, "-o", "junit"))
    assert root.tag == "testsuites"
    assert int(root.get("tests")) == sum(COUNTS.values())
    assert int(root.get("failures")) == COUNTS["invalid"]
    assert int(root.get("errors")) == COUNTS["error"]
    suites = root.findall("testsuite")
    assert [suite.get("name").rpartition("/")[2] for suite in suites] == [f.name for f in FILES]
    for suite in suites:
        assert set(suite.attrib) >= {"name", "tests", "failures", "errors"}
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
        for case in cases:
            assert case.get("name")
            assert {child.tag for child in case} <= {"failure", "error", "skipped", "system-out"}
            for child in case:
                if child.tag in ("failure", "error"):
                    assert child.get("message")
    failure = root.find(".//testcase[@classname='Deployment@apps/v1']/failure")
    assert "spec.replicas" in failure.get("message")
    assert "wrong-type.yaml:7:" in failure.text  # the line of spec.replicas


def test_tap_is_tap_version_13(cli):
    lines = run(cli, "-o", "tap").splitlines()
    assert lines[0] == "TAP version 13"
    assert lines[-1] == f"1..{sum(COUNTS.values())}"
    tests = [line for line in lines if re.match(r"^(not )?ok \d+ ", line)]
    assert [int(re.match(r"^(?:not )?ok (\d+)", line)[1]) for line in tests] == list(range(1, 10))
    assert sum(line.startswith("not ok") for line in tests) == COUNTS["invalid"] + COUNTS["error"]
    assert "ok 1 - tests/data/validate/corpus/valid.yaml (apps/v1/Deployment/demo/web)" in lines
    # Diagnostics are YAML blocks indented under their test line, between --- and ...
    starts = [i for i, line in enumerate(lines) if line == "  ---"]
    assert starts and all(lines[i - 1].startswith("not ok") for i in starts)
    assert lines.count("  ...") == len(starts)


def test_sarif_has_the_properties_sarif_2_1_0_requires(cli):
    document = json.loads(run(cli, "-o", "sarif"))
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = document["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "gpustack"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert len(run_["results"]) == 4
    for result in run_["results"]:
        assert result["ruleId"] in rule_ids
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note", "none")
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"].startswith("tests/data/validate/corpus/")
        assert physical["region"]["startLine"] >= 1
    replicas = next(r for r in run_["results"] if "spec.replicas" in r["message"]["text"])
    assert replicas["locations"][0]["physicalLocation"]["region"]["startLine"] == 7
    broken = next(r for r in run_["results"] if "invalid YAML" in r["message"]["text"])
    assert broken["locations"][0]["physicalLocation"]["region"]["startLine"] == 11


@pytest.mark.parametrize("output", ["text", "json", "junit", "tap", "sarif"])
def test_every_format_is_byte_stable(cli, output):
    assert run(cli, "-o", output, "--summary") == run(cli, "-o", output, "--summary")


@pytest.mark.parametrize("output", ["text", "json", "junit", "tap", "sarif"])
def test_all_valid_exits_zero_in_every_format(cli, output):
    result = cli("validate", "-o", output, CORPUS / "valid.yaml")
    assert result.exit_code == 0, result.output


def test_every_format_gives_the_line_and_column_of_the_field(cli):
    """wrong-type.yaml line 7: `  replicas: "3"`, the value starting in column 13."""
    wrong = CORPUS / "wrong-type.yaml"
    assert "(line 7, column 13)" in cli("validate", "--no-lint", wrong).stdout
    finding = json.loads(cli("validate", "-o", "json", "--no-lint", wrong).stdout)["resources"][0][
        "findings"
    ][0]
    assert (finding["line"], finding["column"], finding["field"]) == (7, 13, "spec.replicas")
    junit = ElementTree.fromstring(cli("validate", "-o", "junit", "--no-lint", wrong).stdout)
    assert next(junit.iter("failure")).text.startswith(
        "tests/data/validate/corpus/wrong-type.yaml:7:13: spec.replicas:"
    )
    tap = cli("validate", "-o", "tap", "--no-lint", wrong).stdout
    assert "      line: 7\n      column: 13\n" in tap
    sarif = json.loads(cli("validate", "-o", "sarif", "--no-lint", wrong).stdout)
    region = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 7, "startColumn": 13}
