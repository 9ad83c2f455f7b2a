"""Lint's work grows with the objects, not with their pairs: the rules that relate objects to each
other (drivers or device plugins that may share a node, DaemonSets selecting each other's pods,
monitors and their targets, node pools in an annotation) look them up in an index, and what no
index tells apart is compared up to a bound, then refused with a clear error.

Work is counted (calls of the exact comparison), never timed: doubling the input must not
quadruple the count.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import examples, run_gpustack
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack
from gpustack.validation import lint
from gpustack.validation.lint import _objects, _pods

DIGEST = "sha256:" + "a" * 64


def openshift_config(pools: int, builds: int) -> str:
    """Many canary pools times many RHCOS builds: one driver DaemonSet for each pair."""
    lines = [
        "apiVersion: gpustack.dev/v1alpha1",
        "kind: GPUStack",
        "metadata: {name: crafted}",
        "platform: {profile: openshift, openshiftVersion: '4.18', kubernetesVersion: '1.31'}",
        "driver:",
        "  mode: driver-toolkit",
        "  rhcosBuilds:",
    ]
    for build in range(builds):
        lines += [
            f"  - rhcosVersion: 416.94.20241021{build:04d}-0",
            f"    driverToolkitImage: quay.io/openshift-release-dev/ocp-v4.0-art-dev@{DIGEST}",
        ]
    lines += ["nodes:", "  pools:"]
    for pool in range(pools):
        lines += [
            f"  - name: p{pool}",
            "    canary: true",
            f"    selector: {{example.com/pool: p{pool}}}",
        ]
    return "\n".join(lines) + "\n"


def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the exact comparisons every index makes (placements and label selectors)."""
    calls = {"overlap": 0, "labels_match": 0}

    def counting(name: str, original: Callable[..., bool]) -> Callable[..., bool]:
        def wrapper(*args: Any) -> bool:
            calls[name] += 1
            return original(*args)

        return wrapper

    monkeypatch.setattr(_pods, "overlap", counting("overlap", _pods.overlap))
    monkeypatch.setattr(_objects, "labels_match", counting("labels_match", _objects.labels_match))
    return calls


def rendered(tmp_path: Path, pools: int, builds: int) -> list[dict[str, Any]]:
    config = tmp_path / f"crafted-{pools}-{builds}.yaml"
    config.write_text(openshift_config(pools, builds))
    return render(load_stack(config)).objects


def test_canary_pools_times_rhcos_builds_lint_in_linear_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = []
    for size in (6, 12):
        objects = rendered(tmp_path, size, size)
        drivers = [o for o in objects if o["metadata"]["name"].startswith("nvidia-driver-daemon")]
        assert len(drivers) == (size + 1) * size  # the cluster's and each pool's, per build
        calls = counted(monkeypatch)
        findings = lint.run(objects, "1.31")
        monkeypatch.undo()
        assert [f for f in findings if f.severity == "error"] == []
        work.append((len(drivers), calls["overlap"] + calls["labels_match"]))
    (small, small_work), (large, large_work) = work
    # Four times the drivers: comparing every pair would be sixteen times the work (12,000
    # comparisons at 156 drivers); looked up, the work grows with the drivers.
    assert large / small > 3.5
    assert large_work / small_work < 5, work
    assert large_work < 10 * large, work


def driver(name: str, affinity: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": affinity}]
                            }
                        }
                    },
                    "containers": [{"name": "driver", "image": "nvcr.io/nvidia/driver:580"}],
                },
            },
        },
    }


def test_drivers_on_the_same_nodes_are_reported_once_each() -> None:
    # Twenty drivers on the same nodes: each is reported once, naming the first, not once for
    # each of the 190 pairs.
    gpu = [{"key": "gpu", "operator": "Exists"}]
    objects = [driver(f"driver-{number:02d}", gpu) for number in range(20)]
    found = [f for f in lint.run(objects) if f.rule == "driver-container-conflict"]
    assert len(found) == 19
    assert all("DaemonSet gpu/driver-00 both install" in f.message for f in found)


def test_drivers_pinned_to_distinct_values_are_never_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = [
        driver(f"driver-{number}", [{"key": "pool", "operator": "In", "values": [str(number)]}])
        for number in range(300)
    ]
    # One more whose values overlap two of them: it and those two are the only pair to compare.
    objects.append(driver("both", [{"key": "pool", "operator": "In", "values": ["7", "9"]}]))
    calls = counted(monkeypatch)
    found = [f for f in lint.run(objects) if f.rule == "driver-container-conflict"]
    assert [f.object and f.object[3] for f in found] == ["both"]
    assert "driver-7" in found[0].message
    assert calls["overlap"] <= 2


def test_placements_no_index_separates_are_refused_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `Exists` against `DoesNotExist` tells these apart, which no value index sees: each driver
    # has its own pattern of them over six keys, so none meets another, and each is compared
    # with every earlier one.
    monkeypatch.setattr(_objects, "MAX_COMPARISONS", 100)
    objects = [
        driver(
            f"driver-{number:02d}",
            [
                {"key": f"bit-{bit}", "operator": "Exists" if number >> bit & 1 else "DoesNotExist"}
                for bit in range(6)
            ],
        )
        for number in range(40)
    ]
    assert not [f for f in lint.run(objects[:14]) if f.rule == "driver-container-conflict"]
    with pytest.raises(UserError) as error:
        lint.run(objects)
    assert error.value.message == (
        "more than 100 pairs of driver pods' node placements to compare, which lint does not "
        "do: the manifests hold thousands of objects that no label tells apart"
    )
    assert error.value.hint == "lint fewer manifests at once, or validate with --no-lint"


def daemonset(name: str, namespace: str = "gpu") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name, "tier": "gpu"}},
                "spec": {"containers": [{"name": "main", "image": "example.com/main:1"}]},
            },
        },
    }


def test_daemonset_selectors_are_looked_up_by_label(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = [daemonset(f"ds-{number}") for number in range(400)]
    broad = daemonset("broad")
    broad["spec"]["selector"] = {"matchLabels": {"tier": "gpu"}}
    objects.append(broad)
    calls = counted(monkeypatch)
    found = [f for f in lint.run(objects) if f.rule == "daemonset-selector-overlap"]
    # The broad one matches every other's pods: one finding on it, counting the rest.
    assert [f.object and f.object[3] for f in found] == ["broad"]
    assert "DaemonSet gpu/broad and DaemonSet gpu/ds-0 (and 399 more)" in found[0].message
    # Each selector tests the pods carrying its labels: 400 own pods, 401 for the broad one.
    assert calls["labels_match"] <= 2 * len(objects)


def test_service_monitors_are_looked_up_by_namespace_and_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects: list[dict[str, Any]] = []
    for number in range(300):
        namespace = f"team-{number}"
        labels = {"app": "exporter"}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "exporter", "namespace": namespace, "labels": labels},
                "spec": {"ports": [{"name": "metrics", "port": 9400}]},
            }
        )
        objects.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": {"name": "exporter", "namespace": namespace},
                "spec": {
                    "selector": {"matchLabels": copy.deepcopy(labels)},
                    "endpoints": [{"port": "metrics" if number else "web"}],
                },
            }
        )
    calls = counted(monkeypatch)
    found = [f for f in lint.run(objects) if f.rule == "monitor-target-missing"]
    assert [f.message.split(" scrapes")[0] for f in found] == ["ServiceMonitor team-0/exporter"]
    # Each monitor tests the one Service of its namespace, not the 300 of all of them.
    assert calls["labels_match"] == 300


def test_pools_of_an_annotation_are_looked_up_not_paired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pools = [
        {"name": f"p{number}", "selector": {"example.com/pool": f"p{number}"}, "config": "x"}
        for number in range(2000)
    ]
    pools.append({"name": "late", "selector": {"example.com/pool": "p5"}, "config": "x"})
    annotation = _objects.POOLS_ANNOTATION
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pools", "namespace": "gpu", "annotations": {annotation: ""}},
    }
    config_map["metadata"]["annotations"][annotation] = json.dumps(pools)
    calls = counted(monkeypatch)
    found = [f for f in lint.run([config_map]) if f.rule == "pool-selector-overlap"]
    assert [f.message.split(" (")[0] for f in found] == ["pools p5 and late"]
    assert calls["overlap"] <= 1


def test_pods_times_the_files_they_mount_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Forty device plugins mounting one ConfigMap of forty files: each rule that reads a
    # plugin's config files reads 1,600 of them; past the bound (for the run), lint stops.
    monkeypatch.setattr(_objects, "MAX_COMPARISONS", 2000)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "plugin-config", "namespace": "gpu"},
        "data": {f"file-{number}.yaml": "version: v1\n" for number in range(40)},
    }
    objects: list[dict[str, Any]] = [config_map]
    for number in range(40):
        plugin = driver(
            f"plugin-{number}", [{"key": "pool", "operator": "In", "values": [str(number)]}]
        )
        spec = plugin["spec"]["template"]["spec"]
        spec["containers"] = [
            {
                "name": "plugin",
                "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
                "command": ["nvidia-device-plugin"],
                "volumeMounts": [{"name": "config", "mountPath": "/config"}],
            }
        ]
        spec["volumes"] = [{"name": "config", "configMap": {"name": "plugin-config"}}]
        objects.append(plugin)
    assert lint.run(objects[:6]) is not None  # five plugins, 200 files a rule: within it
    with pytest.raises(UserError) as error:
        lint.run(objects)
    assert error.value.message.startswith(
        "more than 2000 pairs of pods and the config files they mount to compare"
    )


def test_an_index_of_placements_holds_a_bounded_number(monkeypatch: pytest.MonkeyPatch) -> None:
    # Drivers no label tells apart cost set operations over all of them for each: an index
    # holds at most MAX_PLACEMENTS, which no cluster's GPU workloads come near.
    monkeypatch.setattr(_pods, "MAX_PLACEMENTS", 30)
    gpu = [{"key": "gpu", "operator": "In", "values": ["yes"]}]
    assert lint.run([driver(f"driver-{number}", gpu) for number in range(30)]) is not None
    with pytest.raises(UserError) as error:
        lint.run([driver(f"driver-{number}", gpu) for number in range(31)])
    assert error.value.message.startswith(
        "31 driver pods' node placements to compare, more than the 30 lint compares at once"
    )


def test_lints_bound_in_render_names_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # No config comes near the bound (256 pools, 512 driver DaemonSets); lowered, the error
    # names the config whose rendering lint gave up on.
    monkeypatch.setattr(_objects, "MAX_COMPARISONS", 0)
    result = run_gpustack("check", "examples/multi-pool.yaml", "-o", "out")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: examples/multi-pool.yaml: more than 0 pairs of ")


# --- the indexes leave nothing out ----------------------------------------------------------------

KEYS = ["gpu", "pool", "zone"]
VALUES = ["a", "b", "c"]
EXPRESSIONS = st.fixed_dictionaries(
    {
        "key": st.sampled_from(KEYS),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.lists(st.sampled_from(VALUES), max_size=2, unique=True),
    }
)
PLACEMENTS = st.builds(
    lambda selector, terms: _pods.requirements(
        _objects.Pod(
            {},
            {
                "nodeSelector": selector,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
                        }
                    }
                },
            },
            {},
            "spec",
        )
    ),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(st.lists(EXPRESSIONS, max_size=3), max_size=2),
)


@settings(max_examples=examples(300), deadline=None)
@given(placements=st.lists(PLACEMENTS, min_size=1, max_size=8), query=PLACEMENTS)
def test_the_placement_index_finds_exactly_what_comparing_every_pair_finds(
    placements: list[_pods.Placement], query: _pods.Placement
) -> None:
    index = _pods.Placements(placements, _objects.Budget("placements"))
    expected = [number for number, each in enumerate(placements) if _pods.overlap(query, each)]
    assert list(index.sharing(query)) == expected
    below = len(placements) // 2
    assert list(index.sharing(query, below=below)) == [n for n in expected if n < below]


LABELS = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": LABELS,
        "matchExpressions": st.lists(EXPRESSIONS, max_size=2),
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(labels=st.lists(LABELS, max_size=8), selector=SELECTORS)
def test_the_label_index_finds_exactly_what_testing_every_label_set_finds(
    labels: list[dict[str, Any]], selector: dict[str, Any]
) -> None:
    index = _objects.Labelled(labels, _objects.Budget("labels"))
    expected = [n for n, each in enumerate(labels) if _objects.labels_match(selector, each)]
    assert list(index.matching(selector)) == expected
