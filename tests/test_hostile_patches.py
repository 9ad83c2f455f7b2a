"""`patches:` from a pull request: what a config's patches may read, how much work they may do,
what they may change, and the patterns they select objects with (docs/security.md).

A pull request into a GitOps repository brings configs whose patches CI renders, checks and
diffs: a patch file must be one of the repository's own, the work is bounded, a patched object
is read with care by every later step, and no pattern can make matching run for ever.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, example_base, examples, git, read_manifests, run_gpustack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack.build import patching
from gpustack.build.pipeline import render
from gpustack.errors import Location, UserError
from gpustack.read import bounded
from gpustack.read.patterns import linear_regex
from gpustack.resolve import load as config
from gpustack.resolve.load import load_stack
from gpustack.resolve.patches import Patch, Target, parse_selector

EXAMPLES = ROOT / "examples"
SECRET = "s3cr3t-registry-token"


def _repository(tmp_path: Path) -> Path:
    """A GitOps repository (a real `git init`) beside a folder outside it holding a file a CI
    machine could have: a registry's credentials, as YAML a strategic merge would take."""
    top = tmp_path / "repository"
    (top / "clusters").mkdir(parents=True)
    git(top, "init", "-q")
    outside = tmp_path / "home" / ".docker"
    outside.mkdir(parents=True)
    (outside / "credentials.yaml").write_text(
        yaml.safe_dump({"metadata": {"annotations": {"auth": SECRET}}})
    )
    return top


def _cluster(folder: Path, entries: list[dict[str, Any]], example: str = "kubeadm.yaml") -> Path:
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump({"extends": example_base(folder, example), "patches": entries}))
    return path


# --- 1. a patch file is one of the repository's own ------------------------------------------

COMMANDS = [
    ["render", "clusters/cluster.yaml", "--stdout"],
    ["render", "clusters/cluster.yaml", "-o", "out"],
    ["check", "clusters/cluster.yaml", "-o", "out"],
    ["diff", "clusters/cluster.yaml", "--against", "out"],
    ["diff", "clusters/cluster.yaml", "--against", "out", "--output", "markdown"],
    ["diff", "--profile", "kubeadm", "--profile", "rke2", "clusters/cluster.yaml"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda words: " ".join(words[:1] + words[2:]))
@pytest.mark.parametrize("how", ["dot-dot", "absolute", "link"])
def test_a_patch_file_outside_the_repository_is_refused_and_never_shown(
    tmp_path: Path, how: str, command: list[str]
) -> None:
    top = _repository(tmp_path)
    secret = tmp_path / "home" / ".docker" / "credentials.yaml"
    written = {
        "dot-dot": "../../home/.docker/credentials.yaml",
        "absolute": str(secret),
        "link": "patches/credentials.yaml",
    }[how]
    if how == "link":
        (top / "clusters" / "patches").mkdir()
        (top / "clusters" / "patches" / "credentials.yaml").symlink_to(secret)
    _cluster(top / "clusters", [{"target": {"kind": "DaemonSet"}, "path": written}])
    if command[0] != "render":
        run_gpustack("render", str(EXAMPLES / "kubeadm.yaml"), "-o", "out", cwd=top)
    before = sorted((p.relative_to(top), p.read_bytes()) for p in top.rglob("out/**/*.yaml"))

    result = run_gpustack(*command, cwd=top)

    assert result.returncode == 2, result.stderr
    assert SECRET not in result.stdout + result.stderr
    shown = "clusters/patches/credentials.yaml" if how == "link" else written
    if how == "dot-dot":
        shown = "clusters/../../home/.docker/credentials.yaml"
    assert result.stderr == (
        f"error: clusters/cluster.yaml:3:9: patches.0.path: patch file {shown} is outside the "
        "git repository holding the config (symbolic links followed); a config names only "
        "files of its own repository (keep it in the repository, beside the configs that name "
        "it)\n"
    )
    after = sorted((p.relative_to(top), p.read_bytes()) for p in top.rglob("out/**/*.yaml"))
    assert after == before


def test_a_patch_file_in_the_repositorys_git_folder_is_refused(tmp_path: Path) -> None:
    top = _repository(tmp_path)
    (top / ".git" / "token.yaml").write_text(
        yaml.safe_dump({"metadata": {"labels": {"t": SECRET}}})
    )
    _cluster(top / "clusters", [{"target": {"kind": "DaemonSet"}, "path": "../.git/token.yaml"}])
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top)
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert "is in the repository's .git folder" in result.stderr


@pytest.mark.parametrize("name", ["config.json", "credentials", "patch.yaml.bak"])
def test_a_patch_file_must_be_named_as_yaml(tmp_path: Path, name: str) -> None:
    top = _repository(tmp_path)
    (top / "clusters" / name).write_text(json.dumps({"metadata": {"labels": {"t": SECRET}}}))
    _cluster(top / "clusters", [{"target": {"kind": "DaemonSet"}, "path": name}])
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top)
    assert result.returncode == 2
    assert "must name a YAML file (.yaml or .yml)" in result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_patch_files_anywhere_in_the_repository_apply(tmp_path: Path) -> None:
    """A base in another folder names the fleet's shared patches, and a link inside the
    repository is followed: the whole repository is the root, not the config's folder."""
    top = _repository(tmp_path)
    (top / "patches").mkdir()
    (top / "patches" / "team.yaml").write_text("metadata: {annotations: {team: gpu}}\n")
    (top / "patches" / "link.yaml").symlink_to("team.yaml")
    (top / "bases").mkdir()
    (top / "bases" / "common.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": example_base(top / "bases"),
                "patches": [{"target": {"kind": "DaemonSet"}, "path": "../patches/team.yaml"}],
            }
        )
    )
    (top / "clusters" / "a.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": "../bases/common.yaml",
                "metadata": {"name": "a"},
                "patches": [{"target": {"kind": "Service"}, "path": "../patches/link.yaml"}],
            }
        )
    )
    result = run_gpustack("render", "clusters/a.yaml", "--stdout", cwd=top)
    assert result.returncode == 0, result.stderr
    for document in read_manifests(result.stdout):
        if document["kind"] in ("DaemonSet", "Service"):
            assert document["metadata"]["annotations"]["team"] == "gpu", document["kind"]


def test_outside_any_repository_patch_files_stay_in_the_working_folder(tmp_path: Path) -> None:
    """Before `git init`, a fleet run from its folder reads patch files anywhere in it; a
    config outside the working folder, only those of its own folder."""
    (tmp_path / "fleet" / "clusters").mkdir(parents=True)
    (tmp_path / "fleet" / "patches").mkdir()
    (tmp_path / "fleet" / "patches" / "ok.yaml").write_text("metadata: {annotations: {a: b}}\n")
    (tmp_path / "beside.yaml").write_text("metadata: {annotations: {a: b}}\n")
    assert bounded.repository_top(tmp_path) is None
    clusters = tmp_path / "fleet" / "clusters"
    _cluster(clusters, [{"target": {"kind": "Service"}, "path": "../patches/ok.yaml"}])
    ok = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=tmp_path / "fleet")
    assert ok.returncode == 0, ok.stderr
    elsewhere = run_gpustack("render", clusters / "cluster.yaml", "--stdout", cwd=ROOT)
    assert "is outside the config's folder (symbolic links followed)" in elsewhere.stderr

    _cluster(clusters, [{"target": {"kind": "Service"}, "path": "../../beside.yaml"}])
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=tmp_path / "fleet")
    assert result.returncode == 2
    assert result.stderr == (
        "error: clusters/cluster.yaml:3:9: patches.0.path: patch file "
        "clusters/../../beside.yaml is outside the working folder (symbolic links followed); a "
        "config names only files of its own repository (keep it in the repository, beside the "
        "configs that name it, or in a git repository that holds both)\n"
    )


def test_diff_git_ref_reads_patch_files_of_the_revision(tmp_path: Path) -> None:
    """`diff --git-ref` brings the revision's files into a folder of its own, which holds no
    `.git`: that folder is the repository's top for the patch files its configs name."""
    top = _repository(tmp_path)
    (top / "patches").mkdir()
    (top / "patches" / "team.yaml").write_text("metadata: {annotations: {team: gpu}}\n")
    (top / "clusters" / "a.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": example_base(top / "clusters"),
                "metadata": {"name": "a"},
                "patches": [{"target": {"kind": "Service"}, "path": "../patches/team.yaml"}],
            }
        )
    )
    git(top, "add", "-A")
    git(top, "commit", "-qm", "a cluster with a shared patch")
    (top / "patches" / "team.yaml").write_text("metadata: {annotations: {team: ml}}\n")

    result = run_gpustack("diff", "--git-ref", "HEAD", "clusters/", "--output", "json", cwd=top)

    assert result.returncode == 1, result.stderr
    changed = json.dumps(json.loads(result.stdout))
    assert "-    team: gpu" in changed and "+    team: ml" in changed


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: path.mkdir(), "patch.yaml: is a folder, expected a patch file"),
        (lambda path: os.mkfifo(path), "patch.yaml: is a named pipe (FIFO), expected a patch file"),
        (
            lambda path: path.symlink_to("gone.yaml"),
            "patch file patch.yaml not found (a symbolic link to a missing file)",
        ),
    ],
    ids=["folder", "fifo", "broken-link"],
)
def test_a_patch_file_that_is_no_regular_file_is_named_for_what_it_is(
    tmp_path: Path, make: Any, message: str
) -> None:
    make(tmp_path / "patch.yaml")
    _cluster(tmp_path, [{"target": {"kind": "DaemonSet"}, "path": "patch.yaml"}])
    result = run_gpustack("render", "cluster.yaml", "--stdout", cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr == f"error: cluster.yaml:3:9: patches.0.path: {message}\n"


# --- 2. the work is bounded --------------------------------------------------------------------


def test_a_patch_file_named_many_times_is_read_and_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"metadata": {"annotations": {f"note-{n}": str(n) for n in range(500)}}}
    (tmp_path / "large.yaml").write_text(yaml.safe_dump(body))
    entries = [{"target": {"kind": "Namespace"}, "path": "large.yaml"}] * 40
    read: list[str] = []
    real_read = config.read_bounded

    def counting(path: Any, *arguments: Any, **options: Any) -> bytes:
        read.append(os.path.basename(path))
        return real_read(path, *arguments, **options)

    monkeypatch.setattr(config, "read_bounded", counting)
    config._patch_file_unchanged.cache_clear()
    stack = load_stack(_cluster(tmp_path, entries))
    assert len(stack.patches) == 40
    assert read.count("large.yaml") == 1
    assert render(stack).patched  # 40 x 1,000 values: well within the work allowed


def test_a_large_patch_file_named_many_times_stops_at_the_work_allowed(tmp_path: Path) -> None:
    """20,000 annotations named 300 times: 6 million values to merge (and as many copied),
    refused after a few namings: the file is parsed once, and each naming's work counts."""
    body = {"metadata": {"annotations": {f"n{n}": "" for n in range(20_000)}}}
    (tmp_path / "large.yaml").write_text(json.dumps(body))
    entries = [{"target": {"kind": "Namespace"}, "path": "large.yaml"} for _ in range(300)]
    result = run_gpustack("render", _cluster(tmp_path, entries), "--stdout", timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert ": patches: the patches write, copy or match more than 250000 values" in result.stderr


def test_copies_spread_over_many_patches_count_together(tmp_path: Path) -> None:
    """Work is counted over all of a render's patches: 30 patches of one copy each double the
    object 30 times just as one patch of 30 operations would."""
    entries = [
        {
            "target": {"kind": "Namespace"},
            "patch": json.dumps([{"op": "copy", "from": "/metadata", "path": f"/metadata/m{n}"}]),
        }
        for n in range(30)
    ]
    result = run_gpustack("render", _cluster(tmp_path, entries), "--stdout", timeout=120)
    assert result.returncode == 2
    assert "the patches write, copy or match more than 250000 values in all" in result.stderr


def test_copies_of_a_long_string_count_its_length(tmp_path: Path) -> None:
    """A 500 kB string copied 1,000 times would write 500 MB of output: each copy counts the
    string's length, so the patch stops after a few dozen."""
    operations: list[dict[str, Any]] = [
        {"op": "add", "path": "/metadata/annotations", "value": {"long": "x" * 500_000}}
    ]
    operations += [
        {"op": "copy", "from": "/metadata/annotations/long", "path": f"/metadata/annotations/c{n}"}
        for n in range(1000)
    ]
    entry = {"target": {"kind": "Namespace"}, "patch": json.dumps(operations)}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout", timeout=120)
    assert result.returncode == 2
    assert "the patches write, copy or match more than 250000 values in all" in result.stderr


@pytest.mark.parametrize("op", ["copy", "move"])
def test_operations_that_stack_an_object_deeper_than_the_limit_are_refused(
    tmp_path: Path, op: str
) -> None:
    """Each step copies or moves what the object holds one level deeper: before, a few hundred
    steps ended in a RecursionError."""
    operations: list[dict[str, Any]] = [{"op": "add", "path": "/spec", "value": {"a": {}}}]
    for _ in range(150):
        if op == "copy":
            operations.append({"op": "copy", "from": "/spec", "path": "/spec/a/b"})
        else:  # a location cannot move into itself: through another key
            operations += [
                {"op": "add", "path": "/wrap", "value": {}},
                {"op": "move", "from": "/spec", "path": "/wrap/spec"},
                {"op": "move", "from": "/wrap", "path": "/spec"},
            ]
    entry = {"target": {"kind": "Namespace"}, "patch": json.dumps(operations)}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "nests Namespace gpu-system more than 100 levels deep" in result.stderr


def test_merging_long_lists_by_key_finishes(tmp_path: Path) -> None:
    """Strategic merge finds each item of the object by its merge key (one look-up, where a scan
    made two patches of 3,000 env variables 9 million comparisons), and still merges as
    kustomize does: the second patch's items replace the first's, none twice."""
    env = [{"name": f"V{n}", "value": str(n)} for n in range(3000)]
    merged = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "nvidia-device-plugin", "env": env}]}}
        }
    }
    entry = {"target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"}}
    entries = [{**entry, "patch": yaml.safe_dump(merged)}] * 2
    objects = render(load_stack(_cluster(tmp_path, entries))).objects
    plugin = next(
        o
        for o in objects
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-device-plugin"
    )
    names = [e["name"] for e in plugin["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert names[:3000] == [f"V{n}" for n in range(3000)]
    assert len(names) == len(set(names))


# --- 3. patterns cannot backtrack --------------------------------------------------------------

# Python's backtracking engine tries every way to split a name among the `.*`s before failing
# on the literal: C(53, 24) ways for a 29-character name. RE2 fails in one pass.
BACKTRACKING = ".*" * 24 + "z"


def test_a_backtracking_target_pattern_matches_in_linear_time(tmp_path: Path) -> None:
    entry = {"target": {"kind": "DaemonSet", "name": BACKTRACKING}, "patch": "metadata: {}"}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout", timeout=120)
    assert result.returncode == 2
    assert "the patch matches no object of the rendering" in result.stderr


def test_a_backtracking_file_name_pattern_matches_in_linear_time(tmp_path: Path) -> None:
    manifest = tmp_path / ("a" * 200 + ".yaml")
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    # Searched, as kubeconform searches: Python would try 2^100 ways at each `a` of the name.
    for pattern, ignored in (("(a|aa)*z$", False), ("(a|aa)*\\.yaml$", True)):
        result = run_gpustack(
            "validate", "--summary", "--ignore-filename-pattern", pattern, manifest, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert ("Valid: 0" if ignored else "Valid: 1") in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("pattern", "selected"),
    [
        ("nvidia-.*", True),
        ("nvidia", False),  # matched whole, as kustomize anchors it
        ("(?i)NVIDIA-DEVICE-PLUGIN", True),  # Go's flag syntax
        (r"\pL+(-\pL+)*", True),  # Unicode classes
        ("nvidia-device-plugin|nothing", True),
        ("x*|nvidia-device-plugin", True),  # the whole name, not the leftmost match
    ],
)
def test_target_patterns_mean_what_they_mean_to_kustomize(pattern: str, selected: bool) -> None:
    compiled = linear_regex(pattern, "patches.0.target.name")
    assert bool(compiled.fullmatch("nvidia-device-plugin")) is selected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "invalid escape sequence"),
        ("(?=a)", "invalid perl operator"),
        ("a{1001}", "invalid repetition size"),
        ("(a", "missing )"),
        ("(a{100}){100}", "invalid repetition size"),  # RE2 bounds nested counts too
        (r"\pL{1000}" * 5, "pattern too large - compile failed"),  # past RE2's memory for one
    ],
)
def test_patterns_re2_refuses_are_errors(pattern: str, reason: str) -> None:
    with pytest.raises(UserError) as raised:
        linear_regex(pattern, "--ignore-filename-pattern")
    assert raised.value.message == f"bad regular expression {pattern!r}: {reason}"


def test_a_file_name_that_is_not_utf8_is_matched_as_go_matches_it(tmp_path: Path) -> None:
    """A pull request may add a file whose name holds a byte that is not UTF-8 (Python holds it
    as a lone surrogate, which RE2's binding cannot encode): matched with that byte as U+FFFD,
    as Go's regexp reads it, never a traceback."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    name = os.fsdecode(b"cm-\xff.yaml")
    (folder / name).write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    for pattern, ignored in (("zzz", False), ("cm-.\\.yaml$", True), ("cm-\ufffd", True)):
        result = run_gpustack("validate", "--summary", "--ignore-filename-pattern", pattern, folder)
        assert result.returncode == 0, result.stderr
        assert ("Valid: 0" if ignored else "Valid: 1") in result.stdout, result.stdout


@pytest.mark.parametrize("pattern", [os.fsdecode(b"\xff"), "nvidia-\ud800"])
def test_a_pattern_that_is_not_utf8_is_refused(pattern: str) -> None:
    """Go's regexp refuses a pattern that is not valid UTF-8 (syntax.ErrInvalidUTF8); so does
    gpustack, whether the pattern comes from the command line's bytes or a YAML escape."""
    with pytest.raises(UserError) as raised:
        linear_regex(pattern, "--ignore-filename-pattern")
    assert raised.value.message == f"bad regular expression {pattern!r}: not valid UTF-8"
    result = run_gpustack("validate", "--ignore-filename-pattern", pattern, EXAMPLES)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--ignore-filename-pattern: bad regular expression" in result.stderr


@pytest.mark.parametrize("character", ["\n", "\r", "\x1b[2J", "\u202e", "\x07"])
def test_a_name_a_pull_request_chooses_prints_on_one_line(tmp_path: Path, character: str) -> None:
    """A patch file's name is the config's to choose: a line break in it would print a line of
    its own in the CI log (`::error::...`, which GitHub Actions reads as a command), an escape
    would rewrite the terminal. Every error and warning prints as one line of printable text."""
    entry = {"path": f"x{character}::error::injected.yaml", "target": {"kind": "DaemonSet"}}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    assert result.stderr[:-1].isprintable(), repr(result.stderr)
    assert "x?::error::injected.yaml" in result.stderr or "x?[2J::error::" in result.stderr


def test_a_selector_of_many_requirements_counts_as_work(tmp_path: Path) -> None:
    """A selector of 100,000 requirements is parsed once, and matching it against every object
    counts each requirement: 100,000 times the objects is past the work allowed."""
    selector = ",".join(["a"] * 100_000)
    entry = {"target": {"kind": "DaemonSet", "labelSelector": selector}, "patch": "metadata: {}"}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout", timeout=120)
    assert result.returncode == 2
    assert "the patches write, copy or match more than 250000 values in all" in result.stderr


def test_a_label_selector_is_parsed_in_linear_time(tmp_path: Path) -> None:
    """One pattern over the whole selector would try every split of a run of spaces between a
    key and what follows it: 16,000 spaces would take 17 seconds, these 200,000 about an hour."""
    selector = "a" + " " * 200_000 + "x"
    entry = {"target": {"labelSelector": selector}, "patch": "metadata: {}"}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout", timeout=120)
    assert result.returncode == 2
    assert "patches.0.target.labelSelector: not a Kubernetes label selector" in result.stderr


@pytest.mark.parametrize(
    ("selector", "requirements"),
    [
        ("a=b,c!=d", [("a", "=", {"b"}), ("c", "!=", {"d"})]),
        (" tier in (gpu, cpu) , !skip ", [("tier", "in", {"gpu", "cpu"}), ("skip", "!", set())]),
        ("k notin (z),e", [("k", "notin", {"z"}), ("e", "exists", set())]),
        ("a,", None),  # as Kubernetes: "expected: identifier after ','"
        ("a in b", None),
        ("a in (b,c)), d", None),
    ],
)
def test_label_selectors_parse_as_kubernetes_parses_them(
    selector: str, requirements: list[tuple[str, str, set[str]]] | None
) -> None:
    if requirements is None:
        with pytest.raises(ValueError, match="cannot parse the selector"):
            parse_selector(selector)
    else:
        expected = [(key, op, frozenset(values)) for key, op, values in requirements]
        assert list(parse_selector(selector)) == expected


# --- 4. every step after the patches reads a patched object with care --------------------------

SHAPE_CASES = [
    ([{"op": "remove", "path": "/spec"}], "takes away the pod template"),
    ([{"op": "remove", "path": "/spec/template"}], "takes away the pod template"),
    ([{"op": "replace", "path": "/spec/template/spec", "value": "x"}], "pod template"),
    ([{"op": "replace", "path": "/spec/template/spec/volumes", "value": 5}], "volumes"),
    ([{"op": "add", "path": "/spec/template/spec/volumes/-", "value": 1}], "volumes.4 of"),
    ([{"op": "replace", "path": "/spec/template/spec/containers/0/env", "value": {}}], "env"),
    ([{"op": "replace", "path": "/metadata/labels", "value": ["a"]}], "metadata.labels"),
    ([{"op": "replace", "path": "/spec/template/spec/containers", "value": []}], "every container"),
    ([{"op": "remove", "path": "/spec/template/spec/containers/0"}], "every container"),
    (
        [{"op": "replace", "path": "/metadata", "value": "x"}],
        "would rename, move or change the kind",
    ),
]


@pytest.mark.parametrize("command", COMMANDS[:1] + COMMANDS[2:], ids=lambda w: w[0])
@pytest.mark.parametrize(("operations", "message"), SHAPE_CASES)
def test_patches_that_break_what_later_steps_read_are_errors_at_the_patch(
    tmp_path: Path, command: list[str], operations: list[Any], message: str
) -> None:
    top = _repository(tmp_path)
    entry = {
        "target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
        "patch": json.dumps(operations),
    }
    _cluster(top / "clusters", [entry])
    if command[0] != "render":
        run_gpustack("render", str(EXAMPLES / "kubeadm.yaml"), "-o", "out", cwd=top)
    result = run_gpustack(*command, cwd=top)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: clusters/cluster.yaml:3:10: patches: the patch ")
    assert message in result.stderr
    assert "DaemonSet gpu-system/nvidia-device-plugin" in result.stderr


@pytest.mark.parametrize(
    "containers",
    [
        [{"$patch": "replace"}],  # the list replaced by nothing
        [{"$patch": "delete", "name": "nvidia-device-plugin"}],  # its one container deleted
        None,  # the field removed
    ],
)
def test_a_strategic_merge_that_leaves_no_container_is_an_error(
    tmp_path: Path, containers: Any
) -> None:
    """The API server refuses a pod template without a container, and its schema has no
    minimum for the list: a patch leaving none is refused at the patch, never rendered."""
    entry = {
        "target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
        "patch": yaml.safe_dump({"spec": {"template": {"spec": {"containers": containers}}}}),
    }
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "--stdout")
    assert result.returncode == 2, result.stdout[-300:]
    assert "the patch takes away every container of DaemonSet gpu-system/nvidia-device-plugin" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ('metadata: {annotations: {a: "\\udcff"}}', "half of a UTF-16 surrogate pair"),
        ('[{op: add, path: "/metadata/annotations/\\ud800", value: x}]', "surrogate pair"),
        ("metadata: {annotations: {1: one}}", "a key of the patch is not a string"),
        ("metadata: {annotations: {true: yes}}", "a key of the patch is not a string"),
        ("metadata: {annotations: !!set {a, b}}", "sets (!!set) and ordered pairs (!!pairs)"),
        # Strategic-merge directives gpustack does not apply would reach the object as fields.
        (
            "spec: {template: {spec: {$setElementOrder/containers: [{name: x}]}}}",
            "the directive $setElementOrder is not supported",
        ),
        ("spec: {$retainKeys: [template]}", "the directive $retainKeys is not supported"),
    ],
)
def test_patch_values_no_object_can_hold_are_errors_at_the_patch(
    tmp_path: Path, patch: str, message: str
) -> None:
    """A patch is data for a Kubernetes object: text (never half a character), string keys,
    no YAML-only types. Each is refused at the patch with exit 2, never rendered into a file
    that the API server reads otherwise, nor a traceback."""
    entry = {"target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"}, "patch": patch}
    result = run_gpustack("render", _cluster(tmp_path, [entry]), "-o", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_what_a_patch_may_still_change(tmp_path: Path) -> None:
    """The shape rules refuse no real use: a number for a string (int-or-string fields), a
    mapping removed, an item added, a key removed from a mapping of the pod template."""
    operations = [
        {
            "op": "replace",
            "path": "/spec/updateStrategy/rollingUpdate/maxUnavailable",
            "value": "10%",
        },
        {"op": "remove", "path": "/spec/template/spec/containers/0/securityContext"},
        {"op": "add", "path": "/spec/template/spec/tolerations/-", "value": {"operator": "Exists"}},
        {"op": "add", "path": "/metadata/labels/team", "value": "gpu"},
    ]
    entry = {
        "target": {"kind": "DaemonSet", "name": "gpu-feature-discovery"},
        "patch": json.dumps(operations),
    }
    objects = render(load_stack(_cluster(tmp_path, [entry]))).objects
    gfd = next(
        o
        for o in objects
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpu-feature-discovery"
    )
    assert gfd["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "10%"
    assert "securityContext" not in gfd["spec"]["template"]["spec"]["containers"][0]
    assert gfd["metadata"]["labels"]["team"] == "gpu"


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


_EXAMPLE_FILES = sorted(path.name for path in EXAMPLES.glob("*.yaml"))


@pytest.fixture(scope="module")
def example_objects() -> dict[str, list[dict[str, Any]]]:
    return {name: render(load_stack(EXAMPLES / name)).objects for name in _EXAMPLE_FILES}


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "x", "10%", "canary"]),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "name", "spec"]), st.integers(0, 2), max_size=2),
)


@settings(
    max_examples=examples(150),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_patch_of_any_examples_object_ends_in_a_traceback(
    data: st.DataObject, example_objects: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """A patch at any places of any object of every example (JSON 6902 operations of every
    kind between them, or a strategic merge writing a value of any kind or a directive there)
    is rendered, checked against the committed output and diffed without a traceback: exit 0
    or 1, or 2 with an error."""
    example = data.draw(st.sampled_from(_EXAMPLE_FILES), "example")
    obj = data.draw(st.sampled_from(example_objects[example]), "object")
    places = st.sampled_from(_paths(obj)[1:])
    path = data.draw(places, "path")
    value = data.draw(VALUES, "value")
    as_strategic = data.draw(st.booleans(), "strategic") and all(isinstance(p, str) for p in path)
    if as_strategic:
        directive = data.draw(st.sampled_from([None, "delete", "replace"]), "directive")
        body: Any = value if directive is None else {"$patch": directive, "a": value}
        for part in reversed(path):
            body = {part: body}
        patch = yaml.safe_dump(body)
    else:
        operations = []
        for _ in range(data.draw(st.integers(1, 3), "operations")):
            op = data.draw(st.sampled_from(["remove", "replace", "add", "copy", "move", "test"]))
            operation = {"op": op, "path": _pointer(data.draw(places))}
            if op in ("copy", "move"):
                operation["from"] = _pointer(data.draw(places))
            elif op != "remove":
                operation["value"] = data.draw(VALUES)
            operations.append(operation)
        patch = json.dumps(operations)
    target = {"kind": obj["kind"], "name": obj["metadata"]["name"]}
    _cluster(tmp_path, [{"target": target, "patch": patch}], example)
    for command in (
        ["render", "cluster.yaml", "--stdout"],
        ["check", "cluster.yaml", "-o", str(ROOT / "out")],
        ["diff", "cluster.yaml", "--against", str(ROOT / "out"), "--output", "markdown"],
    ):
        result = run_gpustack(*command, cwd=tmp_path)
        assert "Traceback" not in result.stderr, (command, patch, result.stderr[-2000:])
        assert result.returncode in (0, 1, 2), (command, patch)
        if result.returncode == 2:
            assert result.stderr.startswith("error: "), result.stderr


# --- 6. a patch cannot move an object into another stage, wave or file --------------------------


def _rollout_patch(value: str | None) -> dict[str, Any]:
    return {
        "target": {"kind": "DaemonSet", "labelSelector": "gpustack.dev/rollout=canary"},
        "patch": yaml.safe_dump({"metadata": {"labels": {"gpustack.dev/rollout": value}}}),
    }


@pytest.mark.parametrize("value", [None, "later"])
def test_a_patch_cannot_take_an_object_out_of_the_canary_stage(
    tmp_path: Path, value: str | None
) -> None:
    with pytest.raises(UserError, match="into another Flux stage or Argo CD sync wave"):
        render(load_stack(_cluster(tmp_path, [_rollout_patch(value)], "multi-pool.yaml")))


@pytest.mark.parametrize(
    "annotation",
    ["argocd.argoproj.io/sync-wave", "argocd.argoproj.io/hook"],
)
def test_a_patch_cannot_change_an_objects_argo_cd_wave_or_hook(
    tmp_path: Path, annotation: str
) -> None:
    entry = {
        "target": {"kind": "Job"},
        "patch": yaml.safe_dump({"metadata": {"annotations": {annotation: "PreSync"}}}),
    }
    with pytest.raises(UserError, match="into another Flux stage or Argo CD sync wave"):
        render(load_stack(_cluster(tmp_path, [entry], "multi-pool.yaml")))


def test_other_labels_and_annotations_stay_the_patchs_to_change(tmp_path: Path) -> None:
    entry = {
        "target": {"kind": "DaemonSet", "labelSelector": "gpustack.dev/rollout=canary"},
        "patch": "metadata: {labels: {team: gpu}, annotations: {owner: ml}}\n",
    }
    rendering = render(load_stack(_cluster(tmp_path, [entry], "multi-pool.yaml")))
    assert rendering.patched


def test_a_patch_file_without_a_target_is_never_quoted(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: {SECRET}, namespace: x}}\n"
    )
    with pytest.raises(UserError) as raised:
        render(load_stack(_cluster(tmp_path, [{"path": "mine.yaml"}])))
    assert SECRET not in str(raised.value.message) + str(raised.value.hint)
    assert "the patch file's own apiVersion, kind, name and namespace" in raised.value.message


def test_json6902_failures_never_quote_the_object() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n", "labels": {"from-a-file": SECRET}},
    }
    patch = Patch(
        [{"op": "add", "path": "/metadata/annotations/a", "value": "b"}],
        Location("c.yaml", 3, 5),
        Target(kind="ConfigMap"),
        regexes={"kind": linear_regex("ConfigMap", "kind")},
    )
    with pytest.raises(UserError) as raised:
        patching.apply([obj], [patch])
    assert SECRET not in raised.value.message
    assert raised.value.message == (
        "the JSON 6902 patch fails on ConfigMap n/c: operation 1 ('add' "
        "'/metadata/annotations/a') names a path the object does not have"
    )
