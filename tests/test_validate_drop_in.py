"""`gpustack validate` as a drop-in for kubeconform: its single-dash flags, with gpustack's verdict.

Each test runs the same command line in kubeconform's spelling and in gpustack's, and compares
what a CI script would see (stdout and exit code): a flag means the same in either spelling. The
flags are kubeconform's own (yannh/kubeconform pkg/config/config.go, v0.7.0, parsed by Go's flag
package: `-flag value`, `-flag=value`, booleans also `-flag=false`; -skip and -reject take one
comma-separated value each).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from validate_helpers import CORPUS

from gpustack.validation.kubeconform_flags import (
    KUBECONFORM_FLAG,
    KUBECONFORM_SWITCHES,
    KUBECONFORM_VALUES,
    translate,
)

STRICT_CASES = [
    "valid.yaml",
    "wrong-type.yaml",
    "unknown-field.yaml",
    "duplicate-key.yaml",
    "unknown-kind.yaml",
    "list.yaml",
    "multi-with-broken.yaml",
]
# The corpus every flag pair is tried on: valid, invalid (a wrong type, an unknown field, a
# duplicate key, no metadata.name), an unknown kind, custom resources whose schema is bundled
# (valid, invalid) and, with `-schema-location default` only, a custom resource with no schema.
SPELLING_CORPUS = [
    "valid.yaml",
    "wrong-type.yaml",
    "unknown-field.yaml",
    "duplicate-key.yaml",
    "missing-name.yaml",
    "unknown-kind.yaml",
    "crd-valid.yaml",
    "crd-invalid.yaml",
]
# Every kubeconform flag gpustack takes, with the same request in gpustack's spelling.
FLAG_PAIRS = [
    (["-strict"], ["--strict"]),
    (["-strict=false"], ["--no-strict"]),
    (["-strict=true"], ["--strict"]),
    (["-summary"], ["--summary"]),
    (["-verbose"], ["--verbose"]),
    (["-output", "json"], ["--output", "json"]),
    (["-output=junit"], ["-o", "junit"]),
    (["-output", "tap", "-verbose"], ["--output", "tap", "--verbose"]),
    (["-output", "pretty", "-verbose"], ["-o", "pretty", "--verbose"]),
    (["-output", "text", "-summary"], ["-o", "text", "--summary"]),
    (["-kubernetes-version", "1.30.0"], ["--kubernetes-version", "1.30"]),
    (["-kubernetes-version=master"], ["--kubernetes-version", "master"]),
    (["-schema-location", "default"], ["--schema-location", "default"]),
    (
        ["-schema-location", "default", "-schema-location", "gpustack"],
        ["--schema-location", "default", "--schema-location", "gpustack"],
    ),
    (["-skip", "Deployment,ServiceMonitor"], ["--skip", "Deployment,ServiceMonitor"]),
    (["-skip=apps/v1/Deployment", "-verbose"], ["--skip", "apps/v1/Deployment", "--verbose"]),
    (["-reject", "ConfigMap,Widget"], ["--reject", "ConfigMap,Widget"]),
    (["-ignore-missing-schemas"], ["--ignore-missing-schemas"]),
    (
        ["-ignore-missing-schemas", "-schema-location", "default"],
        ["--ignore-missing-schemas", "--schema-location", "default"],
    ),
    (
        ["-ignore-filename-pattern", "crd-", "-summary"],
        ["--ignore-filename-pattern", "crd-", "--summary"],
    ),
    (["-exit-on-error", "-summary"], ["--exit-on-error", "--summary"]),
    (["-n", "2"], ["--jobs", "2"]),
    (["-n=1", "-summary=false"], ["--jobs", "1"]),
]


def test_every_kubeconform_flag_has_a_pair():
    used = {
        word.partition("=")[0]
        for kubeconform, _ in FLAG_PAIRS
        for word in kubeconform
        if word.startswith("-")
    }
    assert used == (set(KUBECONFORM_SWITCHES) | set(KUBECONFORM_VALUES)) - {"-h"}


@pytest.mark.parametrize(("kubeconform", "gpustack"), FLAG_PAIRS, ids=lambda words: " ".join(words))
def test_a_flag_gets_the_same_verdict_in_either_spelling(cli, kubeconform, gpustack):
    """Per file of the corpus, then all of it at once: the same exit code and the same report
    (every finding, its file, line and message)."""
    verdicts = set()
    for name in SPELLING_CORPUS:
        theirs = cli("validate", *kubeconform, CORPUS / name)
        ours = cli("validate", *gpustack, CORPUS / name)
        assert (theirs.exit_code, theirs.stdout) == (ours.exit_code, ours.stdout), name
        assert theirs.exit_code in (0, 1), theirs.output
        verdicts.add(theirs.exit_code)
    assert verdicts == {0, 1}  # the corpus holds both verdicts for every pair
    paths = [CORPUS / name for name in SPELLING_CORPUS]
    theirs = cli("validate", *kubeconform, *paths)
    ours = cli("validate", *gpustack, *paths)
    assert (theirs.exit_code, theirs.stdout) == (ours.exit_code, ours.stdout)


def test_the_bundled_crd_schemas_apply_in_either_spelling(cli):
    for flags in (["-summary"], ["--summary"]):
        result = cli("validate", "--no-lint", *flags, CORPUS / "crd-invalid.yaml")
        assert result.exit_code == 1
        assert "ServiceMonitor exporter is invalid" in result.stdout
        assert "could not find schema" not in result.stdout
    # A location list replaces the default, in kubeconform's spelling as in its own.
    for flag in ("-schema-location", "--schema-location"):
        alone = cli("validate", flag, "default", CORPUS / "crd-valid.yaml")
        assert alone.exit_code == 1
        assert "could not find schema for ServiceMonitor" in alone.stdout


def both(cli, kubeconform: list[str], gpustack: list[str], *paths):
    theirs = cli("validate", *kubeconform, *paths)
    ours = cli("validate", *gpustack, *paths)
    assert (theirs.exit_code, theirs.stdout) == (ours.exit_code, ours.stdout)
    return theirs


@pytest.mark.parametrize("output", ["text", "json", "junit", "tap", "pretty"])
def test_the_same_command_line_in_both_spellings_gives_the_same_report(cli, output):
    paths = [CORPUS / name for name in STRICT_CASES]
    result = both(
        cli,
        [
            "-strict",
            "-summary",
            "-verbose",
            "-output",
            output,
            "-kubernetes-version",
            "1.31.0",
            "-schema-location",
            "default",
            "-schema-location",
            "gpustack",
        ],
        [
            "--strict",
            "--summary",
            "--verbose",
            "--output",
            output,
            "--kubernetes-version",
            "1.31",
            "--schema-location",
            "default",
            "--schema-location",
            "gpustack",
        ],
        *paths,
    )
    assert result.exit_code == 1
    assert result.stdout


def test_go_flag_forms_are_accepted(cli):
    spaced = cli(
        "validate",
        "-summary",
        "-output",
        "json",
        "-kubernetes-version",
        "1.31.0",
        CORPUS / "valid.yaml",
    )
    joined = cli(
        "validate",
        "-summary=true",
        "-output=json",
        "-kubernetes-version=1.31.0",
        CORPUS / "valid.yaml",
    )
    assert (
        (spaced.exit_code, spaced.stdout) == (joined.exit_code, joined.stdout) == (0, spaced.stdout)
    )
    assert json.loads(spaced.stdout)["summary"]["valid"] == 2
    assert translate(["-strict=false", "-verbose=0", "-n=2", "file.yaml"]) == [
        f"{KUBECONFORM_FLAG}=-strict",
        f"{KUBECONFORM_FLAG}=-verbose",
        f"{KUBECONFORM_FLAG}=-n",
        "--no-strict",
        "--jobs",
        "2",
        "file.yaml",
    ]


def test_kubeconforms_spelling_says_once_where_gpustacks_defaults_differ(cli):
    """kubeconform is not strict without -strict, has no lint rules, does not require
    metadata.name and has only the core kinds' schemas; gpustack keeps its verdict and says so,
    once, on stderr, naming what the command line left open."""
    paths = [CORPUS / name for name in ("unknown-field.yaml", "duplicate-key.yaml", "valid.yaml")]
    spelled = cli("validate", "-summary", "-verbose", *paths)
    assert spelled.exit_code == 1  # strict, as with --summary
    notes = [line for line in spelled.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: gpustack's verdict for kubeconform's flags: strict unless -strict=false, lint rules "
        "unless --no-lint, metadata.name required, gpustack's CRD schemas after the core kinds'; "
        "--kubeconform-defaults gives kubeconform's"
    ]
    chosen = cli(
        "validate", "-strict", "-schema-location", "default", "--no-lint", CORPUS / "valid.yaml"
    )
    assert chosen.exit_code == 0
    assert chosen.stderr == (
        "note: gpustack's verdict for kubeconform's flags: metadata.name required; "
        "--kubeconform-defaults gives kubeconform's\n"
    )
    assert cli("validate", "--summary", *paths).stderr == ""
    assert cli("validate", "--kubeconform-defaults", "-summary", *paths).stderr == ""
    loose = cli("validate", "-strict=false", "-summary", CORPUS / "unknown-field.yaml")
    assert loose.exit_code == 0 and "Valid: 1, Invalid: 0, Errors: 0" in loose.stdout


def test_skip_and_reject_given_twice_keep_every_kind_and_say_so(cli):
    """kubeconform keeps the last -skip (a single string flag); gpustack skips the kinds of every
    one, in either spelling."""
    valid = CORPUS / "valid.yaml"
    skipped = both(
        cli,
        ["-skip", "Deployment", "-skip", "Service", "-summary"],
        ["--skip", "Deployment", "--skip", "Service", "--summary"],
        valid,
    )
    assert "Valid: 0, Invalid: 0, Errors: 0, Skipped: 2" in skipped.stdout
    assert "the kinds of every -skip (kubeconform keeps the last)" in skipped.stderr
    once = cli("validate", "-skip", "Deployment,Service", valid)
    assert "every -skip" not in once.stderr


def test_the_version_of_gpustack_yaml_applies_in_either_spelling_and_is_named(
    cli, tmp_path, monkeypatch
):
    """kubeconform's default is `master`; gpustack's is ./gpustack.yaml's version, in either
    spelling, which the note names. Kubernetes 1.29 has no ValidatingAdmissionPolicy v1
    (served from 1.30), so the version decides the verdict."""
    from conftest import ROOT

    config = (ROOT / "examples" / "kubeadm.yaml").read_text()
    assert 'kubernetesVersion: "1.31"' in config
    (tmp_path / "gpustack.yaml").write_text(config.replace('"1.31"', '"1.29"'))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
        "metadata:\n  name: p\nspec:\n  validations:\n  - expression: 'true'\n"
    )
    monkeypatch.chdir(tmp_path)
    theirs = cli("validate", "-summary", "policy.yaml")
    ours = cli("validate", "--summary", "policy.yaml")
    assert (theirs.exit_code, theirs.stdout) == (ours.exit_code, ours.stdout)
    assert theirs.exit_code == 1 and "could not find schema" in theirs.stdout
    named = "Kubernetes 1.29 of ./gpustack.yaml (-kubernetes-version master: the newest)"
    assert named in theirs.stderr and "gpustack.yaml" not in ours.stderr
    newest = cli("validate", "-kubernetes-version", "master", "-summary", "policy.yaml")
    assert newest.exit_code == 0, newest.output
    assert "gpustack.yaml" not in newest.stderr


def test_kubeconforms_download_flags_are_taken_and_said_unused(cli):
    """-cache and -insecure-skip-tls-verify only concern downloads, which gpustack never makes: a
    CI line with them runs, with the same report as without them."""
    valid = CORPUS / "valid.yaml"
    plain = cli("validate", "-strict", "-summary", valid)
    with_them = cli(
        "validate",
        "-cache",
        "/nonexistent",
        "-insecure-skip-tls-verify",
        "-strict",
        "-summary",
        valid,
    )
    assert (
        (with_them.exit_code, with_them.stdout)
        == (plain.exit_code, plain.stdout)
        == (
            0,
            plain.stdout,
        )
    )
    assert "-cache and -insecure-skip-tls-verify unused (gpustack never downloads schemas)" in (
        with_them.stderr
    )
    assert "unused" not in plain.stderr
    chosen = cli("validate", "--kubeconform-defaults", "-cache=/tmp", valid)
    assert chosen.stderr == "note: -cache unused (gpustack never downloads schemas)\n"


def test_kubeconform_defaults_give_kubeconforms_verdicts(cli):
    """Asked for with --kubeconform-defaults (never implied by the spelling): not strict, no
    name required, no lint rules; the bundled CRD schemas still apply."""
    for name in ("unknown-field.yaml", "duplicate-key.yaml", "missing-name.yaml"):
        assert cli("validate", "--kubeconform-defaults", CORPUS / name).exit_code == 0, name
        assert cli("validate", "-summary", CORPUS / name).exit_code == 1, name
        assert cli("validate", "--summary", CORPUS / name).exit_code == 1, name
    linted = cli("validate", "-strict", CORPUS / "crd-valid.yaml")  # selects no Service
    assert linted.exit_code == 1 and "monitor-target-missing" in linted.stdout
    plain = cli("validate", "--kubeconform-defaults", "-strict", CORPUS / "crd-valid.yaml")
    assert plain.exit_code == 0, plain.output
    invalid = cli("validate", "--kubeconform-defaults", CORPUS / "crd-invalid.yaml")
    assert invalid.exit_code == 1 and "ServiceMonitor exporter is invalid" in invalid.stdout


def test_skip_reject_ignore_missing_schemas_and_filename_patterns(cli):
    valid, unknown = CORPUS / "valid.yaml", CORPUS / "unknown-kind.yaml"
    both(cli, ["-skip", "Service", "-verbose"], ["--skip", "Service", "--verbose"], valid)
    rejected = both(cli, ["-reject", "Deployment"], ["--reject", "Deployment"], valid)
    assert "prohibited resource kind Deployment" in rejected.stdout
    skipped = both(
        cli,
        ["-ignore-missing-schemas", "-summary"],
        ["--ignore-missing-schemas", "--summary"],
        unknown,
    )
    assert "Skipped: 1" in skipped.stdout
    ignored = both(
        cli,
        ["-ignore-filename-pattern", "unknown", "-summary"],
        ["--ignore-filename-pattern", "unknown", "--summary"],
        valid,
        unknown,
    )
    assert "in 1 file" in ignored.stdout


def test_exit_on_error_stops_at_the_first_failure(cli):
    paths = [CORPUS / "valid.yaml", CORPUS / "wrong-type.yaml", CORPUS / "unknown-field.yaml"]
    stopped = both(
        cli,
        ["-strict", "-exit-on-error", "-summary"],
        ["--strict", "--exit-on-error", "--summary"],
        *paths,
    )
    assert stopped.exit_code == 1
    assert stopped.stdout.splitlines()[-1].startswith("Summary: 3 resources found in 2 files")


def test_workers_give_the_same_report_as_one_process(cli):
    one = cli("validate", "-strict", "-summary", "-verbose", "-n", "1", CORPUS)
    two = cli("validate", "-strict", "-summary", "-verbose", "-n", "2", CORPUS)
    assert (one.exit_code, one.stdout) == (two.exit_code, two.stdout)
    assert "Summary: " in two.stdout


@pytest.mark.parametrize("repeated", [False, True])
def test_many_files_give_the_same_report_whether_or_not_workers_take_over(
    cli, monkeypatch, tmp_path, repeated
):
    """Of many files, the first are checked in the command's own process; workers take over the
    rest unless those first files mostly repeat each other (a fleet's clusters)."""
    from gpustack.validation import engine

    names = sorted(path.name for path in CORPUS.iterdir())
    for number in range(6):
        for name in names:
            copy = tmp_path / f"{number}-{name}"
            text = (CORPUS / name).read_text()
            copy.write_text(text if repeated else f"{text}\n# copy {number}\n")
    one = cli("validate", "--summary", "--verbose", "-o", "json", "--jobs", "1", tmp_path)
    monkeypatch.setattr(engine, "PARALLEL_FROM_FILES", 2)
    monkeypatch.setattr(engine, "PROBE_FILES", 4 * len(names))
    default = cli("validate", "--summary", "--verbose", "-o", "json", tmp_path)
    assert (one.exit_code, one.stdout) == (default.exit_code, default.stdout)
    assert len(json.loads(default.stdout)["resources"]) > 6 * len(names)


def test_pretty_is_kubeconforms_pretty_output(cli):
    """pkg/output/pretty.go: a green check mark for valid, a red cross for errors, invalid
    resources as in text; aurora's colour codes."""
    result = cli(
        "validate",
        "-strict",
        "-verbose",
        "-output",
        "pretty",
        CORPUS / "valid.yaml",
        CORPUS / "unknown-kind.yaml",
    )
    assert result.stdout.splitlines() == [
        "\x1b[92m\u2714\x1b[0m tests/data/validate/corpus/valid.yaml: "
        "\x1b[92mDeployment web is valid\x1b[0m",
        "\x1b[92m\u2714\x1b[0m tests/data/validate/corpus/valid.yaml: "
        "\x1b[92mService web is valid\x1b[0m",
        "\x1b[91m\u2716\x1b[0m tests/data/validate/corpus/unknown-kind.yaml: "
        "\x1b[91mWidget failed validation: w could not find schema for Widget "
        "(apiVersion example.com/v1) (line 2, column 1)\x1b[0m",
    ]


def test_pretty_has_no_colour_when_no_color_is_set(cli, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # https://no-color.org
    result = cli("validate", "-verbose", "-output", "pretty", CORPUS / "valid.yaml")
    assert result.exit_code == 0
    assert "\u2714 tests/data/validate/corpus/valid.yaml: Deployment web is valid" in result.stdout
    assert "\x1b[" not in result.stdout


def test_help_and_only_validate_takes_kubeconforms_flags(cli):
    helped = cli("validate", "-h")
    assert helped.exit_code == 0 and "--kubeconform-defaults" in helped.stdout
    assert cli("check", "-summary").exit_code == 2  # other commands keep their own options


def test_a_ci_script_replacing_kubeconform_runs_unchanged():
    """The real console script, as a CI job would call it."""
    from conftest import ROOT

    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpustack",
            "validate",
            "-summary",
            "-output",
            "json",
            "-kubernetes-version",
            "1.31.0",
            "-strict",
            str(CORPUS / "valid.yaml"),
        ],
        capture_output=True,
        cwd=ROOT,
        check=False,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["summary"] == {
        "valid": 2,
        "invalid": 0,
        "errors": 0,
        "skipped": 0,
    }


@pytest.mark.parametrize(
    "arguments",
    [
        ["-ojson", "--verbose"],
        ["--output=tap", "--skip", "ConfigMap", "--skip=Deployment,Service"],
        ["-o", "junit", "--reject", "Service", "--no-strict", "--strict"],
        ["--ignore-filename-pattern", "dup", "--ignore-missing-schemas", "--summary"],
        ["-strict=false", "-summary", "-output=json", "-n", "2"],
        ["-verbose", "-kubernetes-version", "1.30.2", "-exit-on-error"],
        ["--jobs", "1", "--no-lint", "-o", "sarif", "--", "-o"],
        ["--kubeconform-defaults", "--schema-location", "default", "--output", "pretty"],
    ],
)
def test_a_global_option_before_the_command_changes_nothing(cli, arguments):
    """The same command line, with and without `--profiles-dir` in front: the report does not
    depend on how the command line is read."""
    paths = [str(CORPUS / name) for name in STRICT_CASES]
    plain = cli("validate", *arguments, *paths)
    behind = cli("--profiles-dir", CORPUS, "validate", *arguments, *paths)
    assert (plain.exit_code, plain.stdout, plain.stderr) == (
        behind.exit_code,
        behind.stdout,
        behind.stderr,
    )
    assert plain.exit_code in (0, 1), plain.output
