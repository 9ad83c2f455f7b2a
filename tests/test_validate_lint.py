"""Every lint rule, run by `gpustack validate` on a rendered folder, in every output format.

Each case takes gpustack's own render of the kubeadm example (which is clean), makes one mistake a
user could make by hand in the committed files, and expects exactly that rule to report it, in
text, json, junit, tap and sarif alike. The untouched folder is valid in every format.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from conftest import ROOT, read_manifest

from gpustack import emit
from gpustack.layout import HEADER
from gpustack.validation import lint, report

FORMATS = ("text", "json", "junit", "tap", "sarif")
RENDERED = ROOT / "out" / "kubeadm-lab"

Objects = dict[str, Any]


def load(folder: Path, name: str) -> Objects:
    return read_manifest((folder / name).read_text())


def save(folder: Path, name: str, obj: Objects) -> None:
    rewrite(folder / name, HEADER + emit.dump(obj))


def rewrite(path: Path, text: str) -> None:
    """`path` replaced by a new file holding `text`, never written into: a case's folder holds
    links to one pristine copy (folder)."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def edit(name: str, change: Callable[[Objects], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        obj = load(folder, name)
        change(obj)
        save(folder, name, obj)

    return apply


def remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def pod(obj: Objects) -> Objects:
    spec: Objects = obj["spec"]["template"]["spec"]
    return spec


def env(obj: Objects, name: str, value: str) -> None:
    for variable in pod(obj)["containers"][0]["env"]:
        if variable["name"] == name:
            variable["value"] = value


def share_one_gpu_with_one_pod(obj: Objects) -> None:
    obj["data"]["config.yaml"] = obj["data"]["config.yaml"].replace("replicas: 4", "replicas: 1")


def stop_collecting_xid_errors(obj: Objects) -> None:
    counters = obj["data"]["counters.csv"]
    obj["data"]["counters.csv"] = re.sub(r"(?m)^DCGM_FI_DEV_XID_ERRORS,", "# \\g<0>", counters)


def second_device_plugin(folder: Path) -> None:
    plugin = load(folder, "daemonset-nvidia-device-plugin.yaml")
    plugin["metadata"]["name"] = "vendor-device-plugin"
    labels = {"app.kubernetes.io/name": "vendor-device-plugin"}
    plugin["spec"]["selector"]["matchLabels"] = labels
    plugin["spec"]["template"]["metadata"]["labels"] = labels
    save(folder, "daemonset-vendor-device-plugin.yaml", plugin)


def same_selector_as_the_plugin(obj: Objects) -> None:
    plugin_labels = {
        "app.kubernetes.io/name": "nvidia-device-plugin",
        "app.kubernetes.io/part-of": "gpustack",
    }
    obj["spec"]["selector"]["matchLabels"] = dict(plugin_labels)
    obj["spec"]["template"]["metadata"]["labels"].update(plugin_labels)


def gfd_on_a_mig_pool_labelling_for_single(obj: Objects) -> None:
    # Placed on a GKE MIG pool, so MIG devices exist; but GFD says single, the plugin none.
    env(obj, "MIG_STRATEGY", "single")
    pod(obj)["nodeSelector"] = {"cloud.google.com/gke-gpu-partition-size": "1g.10gb"}


def mig_strategy_without_a_mig_manager(folder: Path) -> None:
    edit(
        "configmap-nvidia-device-plugin-config.yaml",
        lambda obj: obj["data"].update(
            {
                "config.yaml": obj["data"]["config.yaml"].replace(
                    "migStrategy: none", "migStrategy: single"
                )
            }
        ),
    )(folder)
    edit("daemonset-gpu-feature-discovery.yaml", lambda obj: env(obj, "MIG_STRATEGY", "single"))(
        folder
    )


def cuda_job_without_gpu(folder: Path) -> None:
    """A hand-written GPU test whose GPU is in requests only (the API server refuses that, and a
    CUDA image without a limit sees every GPU or none)."""
    save(
        folder,
        "job-cuda-test.yaml",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "cuda-test", "namespace": "gpu-system"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "cuda",
                                "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                                "resources": {"requests": {"nvidia.com/gpu": 1}},
                            }
                        ],
                    }
                }
            },
        },
    )


def cdi_without_toolkit(obj: Objects) -> None:
    obj["data"]["config.yaml"] = obj["data"]["config.yaml"].replace(
        "deviceListStrategy: envvar", "deviceListStrategy: cdi-cri"
    )


def driver_container_beside_the_host_driver(folder: Path) -> None:
    driver = load(folder, "daemonset-nvidia-dcgm-exporter.yaml")
    driver["metadata"]["name"] = "nvidia-driver"
    labels = {"app.kubernetes.io/name": "nvidia-driver"}
    driver["spec"]["selector"]["matchLabels"] = labels
    driver["spec"]["template"]["metadata"]["labels"] = labels
    pod(driver)["containers"][0].update(
        image="nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
        command=["nvidia-driver"],
        args=["init"],
    )
    save(folder, "daemonset-nvidia-driver.yaml", driver)


def pools(*entries: tuple[str, dict[str, str], str]) -> Callable[[Objects], None]:
    """Record node pools on the device plugin's ConfigMap as gpustack does with `nodes.pools`
    (name, node selector, the config the pool's nodes select)."""

    def apply(obj: Objects) -> None:
        recorded = [
            {"name": name, "selector": selector, "config": config}
            for name, selector, config in entries
        ]
        obj["metadata"].setdefault("annotations", {})["gpustack.dev/node-pools"] = json.dumps(
            recorded
        )

    return apply


PLUGIN_CONFIG = "configmap-nvidia-device-plugin-config.yaml"


DRA_KUBELET_PLUGIN = "daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"


def dra_kubelet_plugin_beside_the_device_plugin(folder: Path) -> None:
    """The DRA driver's kubelet plugin (from the committed DRA example) added by hand next to
    the device plugin, on the same GPU nodes."""
    shutil.copy(ROOT / "out" / "kubeadm-dra" / DRA_KUBELET_PLUGIN, folder / DRA_KUBELET_PLUGIN)


def gpu_limit_where_dra_hands_out_gpus(folder: Path) -> None:
    """The device plugin swapped for the DRA driver by hand, and a GPU job still asking for
    nvidia.com/gpu, which nothing advertises any more."""
    (folder / "daemonset-nvidia-device-plugin.yaml").unlink()
    dra_kubelet_plugin_beside_the_device_plugin(folder)
    cuda_job_without_gpu(folder)
    edit(
        "job-cuda-test.yaml",
        lambda obj: pod(obj)["containers"][0].update(resources={"limits": {"nvidia.com/gpu": 1}}),
    )(folder)


MISTAKES: dict[str, Callable[[Path], None]] = {
    # The NFD worker must reach tainted GPU nodes to label them (GPU pods that use the
    # RuntimeClass get its tolerations from the class, so they would still be tolerated).
    "taint-not-tolerated": edit(
        "daemonset-nfd-worker.yaml", lambda obj: pod(obj).pop("tolerations")
    ),
    "node-label-unsourced": remove("nodefeaturerule-nvidia-gpu-pci-10de.yaml"),
    "runtime-class-missing": remove("runtimeclass-nvidia.yaml"),
    "monitor-target-missing": edit(
        "servicemonitor-nvidia-dcgm-exporter.yaml",
        lambda obj: obj["spec"]["endpoints"][0].update(port="web"),
    ),
    "config-map-missing": remove("configmap-nvidia-dcgm-exporter-metrics.yaml"),
    "dcgm-metric-not-collected": edit(
        "configmap-nvidia-dcgm-exporter-metrics.yaml", stop_collecting_xid_errors
    ),
    "device-plugin-config-invalid": edit(
        "configmap-nvidia-device-plugin-config.yaml", share_one_gpu_with_one_pod
    ),
    "mig-strategy-mismatch": edit(
        "daemonset-gpu-feature-discovery.yaml", gfd_on_a_mig_pool_labelling_for_single
    ),
    "mig-strategy-without-partitions": mig_strategy_without_a_mig_manager,
    "duplicate-device-plugin": second_device_plugin,
    "dra-with-device-plugin": dra_kubelet_plugin_beside_the_device_plugin,
    "gpu-resource-on-dra": gpu_limit_where_dra_hands_out_gpus,
    "api-version-not-served": edit(
        "runtimeclass-nvidia.yaml", lambda obj: obj.update(apiVersion="node.k8s.io/v1beta1")
    ),
    "image-not-pinned": edit(
        "daemonset-nvidia-dcgm-exporter.yaml",
        lambda obj: pod(obj)["containers"][0].update(
            image="nvcr.io/nvidia/k8s/dcgm-exporter:latest"
        ),
    ),
    # A label a patch or a hand edit gives with a space in its value: schema-valid, refused by
    # the API server.
    "metadata-invalid": edit(
        "daemonset-nvidia-dcgm-exporter.yaml",
        lambda obj: obj["metadata"]["labels"].update({"example.com/team": "gpu team"}),
    ),
    "daemonset-selector-overlap": edit(
        "daemonset-gpu-feature-discovery.yaml", same_selector_as_the_plugin
    ),
    "gpu-not-requested": cuda_job_without_gpu,
    "cdi-without-toolkit": edit("configmap-nvidia-device-plugin-config.yaml", cdi_without_toolkit),
    # The same edit, validated for Kubernetes 1.28: the CRI field alone reaches no runtime there.
    "cdi-cri-unsupported": edit("configmap-nvidia-device-plugin-config.yaml", cdi_without_toolkit),
    "driver-container-conflict": driver_container_beside_the_host_driver,
    # A pool whose nodes select a config the ConfigMap does not hold.
    "pool-config-missing": edit(
        PLUGIN_CONFIG, pools(("training", {"example.com/gpu-pool": "training"}, "training"))
    ),
    # Two pools selected by different keys: a node labelled with both is in both.
    "pool-selector-overlap": edit(
        PLUGIN_CONFIG,
        pools(
            ("a100", {"example.com/gpu": "a100"}, "config.yaml"),
            ("spot", {"example.com/capacity": "spot"}, "config.yaml"),
        ),
    ),
    # A pool of nodes without an NVIDIA GPU, which no GPU DaemonSet selects.
    "pool-outside-gpu-nodes": edit(
        PLUGIN_CONFIG,
        pools(("cpu", {"feature.node.kubernetes.io/pci-10de.present": "false"}, "config.yaml")),
    ),
    # A hand edit that drops the exporter's wait for the validator.
    "validation-not-awaited": edit(
        "daemonset-nvidia-dcgm-exporter.yaml", lambda obj: pod(obj).pop("initContainers")
    ),
}


def test_every_rule_has_a_case():
    assert sorted(MISTAKES) == sorted(rule.id for rule in lint.RULES)


RULE_ID = re.compile(r"\[([a-z]+(?:-[a-z]+)+)\]")


def rules_reported(output: str, text: str) -> set[str]:
    """The lint rule ids a report names, read the way a consumer of that format reads it."""
    lint_ids = {rule.id for rule in lint.RULES}
    if output == "json":
        found = {
            finding["rule"]
            for entry in json.loads(text)["resources"]
            for finding in entry.get("findings", [])
        }
    elif output == "sarif":
        found = {result["ruleId"] for result in json.loads(text)["runs"][0]["results"]}
    elif output == "junit":
        # A lint finding is a <failure>, or part of the <error> of a resource that also failed
        # to be checked (its message then joins both).
        found = {
            rule
            for kind in ("failure", "error")
            for element in ElementTree.fromstring(text).iter(kind)
            for rule in RULE_ID.findall(element.get("message", ""))
        }
    elif output == "tap":
        found = {
            rule
            for line in text.splitlines()
            if line.startswith("not ok")
            for rule in RULE_ID.findall(line)
        }
    else:
        found = {rule for line in text.splitlines() for rule in RULE_ID.findall(line)}
    return found & lint_ids


PRISTINE_TIMES: dict[Path, dict[str, int]] = {}  # when each pristine file was written


def written_times(folder: Path) -> dict[str, int]:
    return {
        str(path.relative_to(folder)): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file()
    }


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed folder, which the cases' folders link to."""
    copy = tmp_path_factory.mktemp("pristine") / "kubeadm-lab"
    shutil.copytree(RENDERED, copy)
    PRISTINE_TIMES[copy] = written_times(copy)
    return copy


@pytest.fixture
def folder(pristine: Path, tmp_path: Path) -> Iterator[Path]:
    """The committed folder for one case, its files hard links to the pristine copy: cheaper
    than copies, and the cases replace a file they change (rewrite), never write into it."""
    copy = tmp_path / "kubeadm-lab"
    shutil.copytree(pristine, copy, copy_function=os.link)
    yield copy
    # Nothing was written into a link: the pristine files are as the copy left them.
    assert written_times(pristine) == PRISTINE_TIMES[pristine]


# The Kubernetes version a rule's mistake needs (default 1.31, the example's).
VERSIONS = {"cdi-cri-unsupported": "1.28"}


def validate(cli: Any, folder: Path, output: str, version: str = "1.31") -> Any:
    return cli("validate", "-o", output, "--kubernetes-version", version, folder)


def in_every_format(
    cli: Any, monkeypatch: pytest.MonkeyPatch, folder: Path, output: str, version: str
) -> tuple[Any, dict[str, str]]:
    """One `gpustack validate -o OUTPUT` of `folder` (its result) and its report in every format:
    OUTPUT's as the command printed it, the others written by the same report writer
    (report.formatted, which the command calls with its -o) from the same findings. The folder
    is checked once, not once a format: every format's own command line runs in
    test_gpustacks_own_output_is_quiet_in_every_format, and each rule's case below runs a
    different one."""
    made: list[report.Report] = []
    writer = report.formatted

    def kept(outcome: report.Report, *arguments: Any) -> str:
        made.append(outcome)
        return writer(outcome, *arguments)

    monkeypatch.setattr(report, "formatted", kept)
    result = validate(cli, folder, output, version)
    monkeypatch.setattr(report, "formatted", writer)
    (outcome,) = made
    texts = {name: writer(outcome, name) for name in FORMATS}
    assert texts[output] == result.stdout  # what the command printed, from these findings
    return result, texts


def test_gpustacks_own_output_is_quiet_in_every_format(cli, folder):
    for output in FORMATS:
        result = validate(cli, folder, output)
        assert result.exit_code == 0, (output, result.output)
        assert rules_reported(output, result.stdout) == set(), output


@pytest.mark.parametrize("rule", sorted(MISTAKES))
def test_each_rule_reports_its_mistake_in_every_format(cli, monkeypatch, folder, rule):
    MISTAKES[rule](folder)  # one mistake, reported in each format
    # The command line's own format turns with the rule: each format's is run on mistakes.
    output = FORMATS[sorted(MISTAKES).index(rule) % len(FORMATS)]
    result, texts = in_every_format(cli, monkeypatch, folder, output, VERSIONS.get(rule, "1.31"))
    assert result.exit_code == 1, (output, result.output)
    for output, text in texts.items():
        assert rule in rules_reported(output, text), output


# Written where the annotation names its rule, then replaced by the rule's id: a plain word as
# each rule id is, so the file is byte for byte what annotating it with the rule writes.
RULE_SLOT = "rule-to-ignore"


@functools.cache
def ignoring_a_rule(text: str) -> str:
    """A folder's file (`text`) with its object annotated gpustack.dev/ignore: RULE_SLOT; made
    once a file's content, as most files are the same in every case."""
    obj = read_manifest(text)
    obj["metadata"].setdefault("annotations", {})[lint.IGNORE_ANNOTATION] = RULE_SLOT
    return HEADER + emit.dump(obj)


@pytest.mark.parametrize("rule", sorted(MISTAKES))
def test_the_ignore_annotation_silences_a_rule(cli, folder, rule):
    """Annotating every object with gpustack.dev/ignore: <rule> leaves that rule quiet."""
    MISTAKES[rule](folder)
    for path in folder.glob("*.yaml"):
        if path.name == "kustomization.yaml":
            continue
        annotated = ignoring_a_rule(path.read_text())
        assert RULE_SLOT in annotated, path
        rewrite(path, annotated.replace(RULE_SLOT, rule))
    result = validate(cli, folder, "json", VERSIONS.get(rule, "1.31"))
    assert rule not in rules_reported("json", result.stdout)


def test_every_committed_render_validates_on_its_own(cli):
    """`gpustack validate out/` (what the pre-commit hook runs on committed output) passes for
    every profile: the folders carry what lint needs, e.g. RKE2's platform RuntimeClass."""
    result = cli("validate", "--summary", ROOT / "out")
    assert result.exit_code == 0, result.output
    assert ", Invalid: 0, Errors: 0" in result.stdout


# --- dra-with-device-plugin and node pools -----------------------------------------------------
MIXED = ROOT / "out" / "mixed-allocation"
POOL_KEY = "example.com/gpu-pool"


def first_term(obj: Objects) -> list[dict[str, Any]]:
    affinity = pod(obj)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    terms: list[dict[str, Any]] = affinity["nodeSelectorTerms"][0]["matchExpressions"]
    return terms


def pool_expression(obj: Objects) -> dict[str, Any]:
    (expression,) = [e for e in first_term(obj) if e["key"] == POOL_KEY]
    return expression


def test_a_device_plugin_kept_off_the_dra_pools_is_no_finding(cli, tmp_path):
    """The committed mixed cluster: the plugin excludes the DRA pool (NotIn), the kubelet plugin
    selects it (In)."""
    result = validate(cli, MIXED, "json", "1.34")
    assert result.exit_code == 0, result.output
    assert rules_reported("json", result.stdout) == set()


def test_a_device_plugin_excluding_two_pools_of_one_label_overlaps_neither(cli, tmp_path):
    """NotIn [training] and NotIn [batch] on one key, as a DaemonSet excluding two pools has:
    a node of either pool runs no plugin, so a kubelet plugin there is no overlap."""
    folder = tmp_path / "mixed"
    shutil.copytree(MIXED, folder)
    plugin = load(folder, "daemonset-nvidia-device-plugin.yaml")
    first_term(plugin).append({"key": POOL_KEY, "operator": "NotIn", "values": ["batch"]})
    save(folder, "daemonset-nvidia-device-plugin.yaml", plugin)
    result = validate(cli, folder, "json", "1.34")
    assert "dra-with-device-plugin" not in rules_reported("json", result.stdout)


def test_a_dra_kubelet_plugin_reaching_a_device_plugin_pool_is_caught(cli, tmp_path):
    folder = tmp_path / "mixed"
    shutil.copytree(MIXED, folder)
    name = "daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"
    kubelet_plugin = load(folder, name)
    pool_expression(kubelet_plugin)["values"] = ["training", "inference"]
    save(folder, name, kubelet_plugin)
    result = validate(cli, folder, "json", "1.34")
    assert result.exit_code == 1, result.output
    assert "dra-with-device-plugin" in rules_reported("json", result.stdout)
