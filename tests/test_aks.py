"""AKS: what AKS's GPU node pools bring, what gpustack must add, and the pool command in node/.

Expectations are AKS's own facts, not gpustack's code:
- a GPU node's containerd config makes `nvidia-container-runtime` the default runtime
  (Azure/AgentBaker pkg/agent/baker.go, `IsNSeriesSKU`: `default_runtime_name =
  "nvidia-container-runtime"`, BinaryName /usr/bin/nvidia-container-runtime, config versions 2
  and 3), written to /etc/containerd/config.toml (parts/linux/cloud-init/artifacts/cse_config.sh)
  under a containerd unit with Restart=always and KillMode=process (artifacts/containerd.service);
- the node image installs the driver and `nvidia-smi` on the host (cse_config.sh
  configGPUDrivers), AKS adds no device plugin (learn.microsoft.com azure/aks use-nvidia-gpu);
- a pool created with `--gpu-driver none` (Azure CLI 2.72.2 and later) gets no driver and the
  runc-only containerd config (cse_config.sh: SkipGpuDriverInstall), so NVIDIA's driver container
  and toolkit are needed (learn.microsoft.com azure/aks nvidia-gpu-operator);
- Azure Monitor managed Prometheus reads ServiceMonitors of the group azmonitoring.coreos.com/v1
  only, with labelLimit 63, labelNameLengthLimit 511 and labelValueLengthLimit 1023 in its
  templates (learn.microsoft.com azure-monitor containers/prometheus-metrics-scrape-crd), and no
  rule objects from the cluster;
- AKS offers the OS SKU Ubuntu2204 for Kubernetes 1.25 to 1.33 and Ubuntu2404 for 1.32 to 1.38
  (MicrosoftDocs/azure-aks-docs articles/aks/upgrade-os-version.md, "Supported OS versions"), so
  a pool asking for another pair is refused by AKS.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config
from manifests import env, host_path
from ruamel.yaml import YAML

from gpustack.build.pipeline import Rendering, render
from gpustack.resolve.load import load_stack

AKS_RUNTIME = "nvidia-container-runtime"
AKS_CONTAINERD_CONFIG = "/etc/containerd/config.toml"
AKS_CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
AZURE_MONITOR_LIMITS = {
    "labelLimit": 63,
    "labelNameLengthLimit": 511,
    "labelValueLengthLimit": 1023,
}
CONTAINER = "driver: {mode: container}\n"


def write(tmp_path: Path, body: str = "", profile: str = "aks") -> Path:
    return write_config(tmp_path, profile, body, file="aks.yaml")


def rendered(tmp_path: Path, body: str = "") -> Rendering:
    return render(load_stack(write(tmp_path, body)))


def objects_of(rendering: Rendering, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendering.objects if o["kind"] == kind}


def pod_specs(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {
        name: daemonset["spec"]["template"]["spec"]
        for name, daemonset in objects_of(rendering, "DaemonSet").items()
    }


def test_default_pool_gets_the_plugin_and_the_rest_but_no_driver_toolkit_or_runtime_class(
    tmp_path,
):
    rendering = rendered(tmp_path)
    specs = pod_specs(rendering)
    # AKS leaves the device plugin to the user; the node image brings driver and toolkit.
    assert {
        "nvidia-device-plugin",
        "gpu-feature-discovery",
        "nfd-worker",
        "nvidia-dcgm-exporter",
        "nvidia-operator-validator",
    } <= set(specs)
    assert "nvidia-driver-daemonset" not in specs
    assert "nvidia-container-toolkit-daemonset" not in specs
    # nvidia is containerd's default runtime on an AKS GPU node: no pod names a class (AKS has no
    # `nvidia` RuntimeClass, so naming one would leave every GPU pod unscheduled).
    assert not objects_of(rendering, "RuntimeClass")
    assert not [name for name, spec in specs.items() if "runtimeClassName" in spec]
    # The device plugin finds AKS's host driver at the root, and hands GPUs over as the nvidia
    # runtime reads them without CDI (AKS's runtime is not in CDI mode).
    [text] = objects_of(rendering, "ConfigMap")["nvidia-device-plugin-config"]["data"].values()
    flags = YAML(typ="safe").load(text)["flags"]
    assert (flags["nvidiaDriverRoot"], flags["nvidiaDevRoot"]) == ("/", "/")
    assert flags["plugin"]["deviceListStrategy"] == "envvar"


def test_toolkit_of_a_pool_without_aks_driver_configures_aks_containerd(tmp_path):
    rendering = rendered(tmp_path, CONTAINER)
    specs = pod_specs(rendering)
    assert "nvidia-driver-daemonset" in specs
    spec = specs["nvidia-container-toolkit-daemonset"]
    (main,) = spec["containers"]
    variables = env(main)
    # The file AgentBaker writes containerd's config to, the socket of its containerd unit.
    assert host_path(spec, variables["CONTAINERD_CONFIG"]) == AKS_CONTAINERD_CONFIG
    assert host_path(spec, variables["CONTAINERD_SOCKET"]) == AKS_CONTAINERD_SOCKET
    # containerd.service: Restart=always, so SIGHUP (containerd exits) is a restart.
    assert variables["RUNTIME_RESTART_MODE"] == "signal"
    assert spec["hostPID"] is True
    # The runtime is AKS's name for it and the default, as on AKS's own GPU nodes: GPU pods work
    # the same in both driver modes, with no RuntimeClass.
    assert variables["CONTAINERD_RUNTIME_CLASS"] == AKS_RUNTIME
    assert variables["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "true"
    assert not objects_of(rendering, "RuntimeClass")
    assert not [name for name, spec in specs.items() if "runtimeClassName" in spec]


def test_a_runtime_class_asked_for_names_the_runtime_aks_has(tmp_path):
    rendering = rendered(tmp_path, "runtimeClass: {enabled: true}\n")
    [runtime_class] = objects_of(rendering, "RuntimeClass").values()
    assert runtime_class["handler"] == AKS_RUNTIME


def test_dcgm_exporter_is_scraped_by_azure_monitor_and_gets_no_rules(tmp_path):
    rendering = rendered(tmp_path)
    [monitor] = objects_of(rendering, "ServiceMonitor").values()
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    assert AZURE_MONITOR_LIMITS.items() <= monitor["spec"].items()
    [service] = objects_of(rendering, "Service").values()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    # Azure Monitor loads no PrometheusRule: none is rendered unless asked for.
    assert not objects_of(rendering, "PrometheusRule")
    asked = rendered(tmp_path, "alerts: {enabled: true}\n")
    assert objects_of(asked, "PrometheusRule")


def test_prometheus_operator_stays_possible_on_aks(tmp_path):
    rendering = rendered(tmp_path, "dcgmExporter: {monitor: servicemonitor}\n")
    [monitor] = objects_of(rendering, "ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert "labelLimit" not in monitor["spec"]
    assert objects_of(rendering, "PrometheusRule")


def fake_az(tmp_path: Path) -> Path:
    """An `az` that writes its arguments, one per line, where the test reads them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    az = bin_dir / "az"
    az.write_text('#!/bin/sh\nfor arg in "$@"; do printf "%s\\n" "$arg"; done > "$AZ_ARGS"\n')
    az.chmod(0o755)
    return bin_dir


def run_pool_script(
    tmp_path: Path, rendering: Rendering, **variables: str
) -> tuple[int, list[str], str]:
    script = tmp_path / "aks-node-pool.sh"
    script.write_text(rendering.node_files["aks-node-pool.sh"])
    args = tmp_path / "az-args"
    environment = {
        "PATH": f"{fake_az(tmp_path)}{os.pathsep}{os.environ['PATH']}",
        "AZ_ARGS": str(args),
        **variables,
    }
    done = subprocess.run(
        ["sh", str(script)], env=environment, capture_output=True, text=True, check=False
    )
    return done.returncode, args.read_text().splitlines() if args.exists() else [], done.stderr


def flag_values(argv: list[str]) -> dict[str, list[str]]:
    """`--flag=value` and `--flag value...` as az reads them."""
    flags: dict[str, list[str]] = {}
    current = ""
    for word in argv[3:]:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            current = name
            flags[name] = [value] if value else []
        else:
            flags[current].append(word)
    return flags


@pytest.mark.parametrize("container", [False, True])
def test_pool_command_creates_the_pool_the_manifests_expect(tmp_path, container):
    body = textwrap.dedent(
        """\
        nodes:
          selector: {gpu.example.com/stack: gpustack}
          taints:
          - {key: sku, value: gpu, effect: NoSchedule}
          - {key: nvidia.com/gpu, effect: NoExecute}
          aks: {vmSize: Standard_NC24ads_A100_v4}
        """
    ) + (CONTAINER if container else "")
    rendering = rendered(tmp_path, body)
    code, argv, stderr = run_pool_script(tmp_path, rendering, RESOURCE_GROUP="rg", CLUSTER="aks-1")
    assert code == 0, stderr
    assert argv[:3] == ["aks", "nodepool", "add"]
    flags = flag_values(argv)
    assert flags["resource-group"] == ["rg"] and flags["cluster-name"] == ["aks-1"]
    assert flags["node-vm-size"] == ["Standard_NC24ads_A100_v4"]
    assert flags["node-taints"] == ["sku=gpu:NoSchedule,nvidia.com/gpu:NoExecute"]
    labels = dict(label.split("=", 1) for label in flags["labels"])
    assert labels["gpu.example.com/stack"] == "gpustack"
    # The pool's nodes carry what every GPU workload selects on and tolerates.
    plugin = pod_specs(rendering)["nvidia-device-plugin"]
    tolerated = {(t["key"], t.get("value"), t.get("effect")) for t in plugin["tolerations"]}
    assert ("sku", "gpu", "NoSchedule") in tolerated
    selected = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {
        expression["key"]
        for term in selected["nodeSelectorTerms"]
        for expression in term["matchExpressions"]
    }
    assert "gpu.example.com/stack" in keys
    # Only a pool whose driver gpustack installs skips AKS's driver; its nodes run the Ubuntu
    # release the driver image is built for (driver.nodeOS, default ubuntu22.04).
    assert (flags.get("gpu-driver") == ["none"]) == container
    assert flags.get("os-sku") == (["Ubuntu2204"] if container else None)
    if container:
        assert labels["nvidia.com/gpu.deploy.driver"] == "true"


def test_a_driver_for_ubuntu_24_04_gets_a_pool_of_ubuntu_24_04(tmp_path):
    rendering = rendered(tmp_path, "driver: {mode: container, nodeOS: ubuntu24.04}\n")
    code, argv, stderr = run_pool_script(tmp_path, rendering, RESOURCE_GROUP="rg", CLUSTER="c")
    assert code == 0, stderr
    assert flag_values(argv)["os-sku"] == ["Ubuntu2404"]
    [driver] = [o for o in rendering.objects if o["metadata"]["name"] == "nvidia-driver-daemonset"]
    (main,) = [
        c
        for c in driver["spec"]["template"]["spec"]["containers"]
        if c["name"] == "nvidia-driver-ctr"
    ]
    assert main["image"].endswith("-ubuntu24.04")


def test_pool_command_refuses_to_run_without_its_resource_group(tmp_path):
    code, argv, stderr = run_pool_script(tmp_path, rendered(tmp_path), CLUSTER="aks-1")
    assert code != 0 and not argv
    assert "set RESOURCE_GROUP" in stderr


def test_node_readme_says_why_there_is_no_managed_pool(tmp_path):
    readme = rendered(tmp_path).node_files["README.md"]
    assert "managementMode: Managed" in readme
    assert "kubernetes.azure.com/dcgm-exporter=enabled" in readme
    container = rendered(tmp_path, CONTAINER).node_files["README.md"]
    assert "`--gpu-driver none`" in container and "2.72.2" in container


@pytest.mark.parametrize(
    ("profile", "body", "field"),
    [
        ("kubeadm", "nodes: {aks: {vmSize: Standard_NC4as_T4_v3}}\n", "nodes.aks"),
        ("aks", "nodes: {aks: {vmSize: NC4as_T4_v3}}\n", "nodes.aks.vmSize"),
        ("aks", "driver: {mode: gke-managed}\n", "driver.mode"),
        # AKS has no RHEL pools: NVIDIA's RHEL driver image would run on no node.
        ("aks", "driver: {mode: container, nodeOS: rhel9.6}\n", "driver.nodeOS"),
    ],
)
def test_what_an_aks_pool_cannot_be_is_refused(tmp_path, cli, profile, body, field):
    result = cli("render", write(tmp_path, body, profile), "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "aks.yaml:5:" in result.output and field in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("kubernetes", "node_os", "hint"),
    [
        # Ubuntu2204 is offered up to 1.33: a 1.34 cluster's new pools run Ubuntu 24.04.
        ("1.34", "ubuntu22.04", "driver.nodeOS: ubuntu24.04"),
        # Ubuntu2404 is offered from 1.32.
        ("1.31", "ubuntu24.04", "driver.nodeOS: ubuntu22.04"),
    ],
)
def test_a_pool_os_aks_does_not_offer_at_that_kubernetes_version_is_refused(
    tmp_path, cli, kubernetes, node_os, hint
):
    path = tmp_path / "aks.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        f"platform: {{profile: aks, kubernetesVersion: '{kubernetes}'}}\n"
        f"driver: {{mode: container, nodeOS: {node_os}}}\n"
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "aks.yaml:5:" in result.output and "driver.nodeOS" in result.output, result.output
    assert hint in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("kubernetes", "node_os", "sku"),
    [
        ("1.33", "ubuntu22.04", "Ubuntu2204"),
        ("1.32", "ubuntu24.04", "Ubuntu2404"),
        ("1.35", "ubuntu24.04", "Ubuntu2404"),
    ],
)
def test_the_pool_os_of_the_driver_is_offered_across_its_kubernetes_versions(
    tmp_path, kubernetes, node_os, sku
):
    path = tmp_path / "aks.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        f"platform: {{profile: aks, kubernetesVersion: '{kubernetes}'}}\n"
        f"driver: {{mode: container, nodeOS: {node_os}}}\n"
    )
    rendering = render(load_stack(path))
    code, argv, stderr = run_pool_script(tmp_path, rendering, RESOURCE_GROUP="rg", CLUSTER="c")
    assert code == 0, stderr
    assert flag_values(argv)["os-sku"] == [sku]
