"""The EKS profiles against the platforms' own facts: the containerd config nodeadm and
Bottlerocket write, Bottlerocket's device plugin settings model, eksctl's node group schema.

Each upstream fact is written out here, cited, as the oracle the rendered output is held to, so
a test fails when gpustack drifts from what the node images actually do or accept.
"""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from conftest import ROOT, is_core, validate_upstream
from kubernetes_validate.utils import SchemaNotFoundError
from ruamel.yaml import YAML

from gpustack.build.pipeline import Rendering, render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack
from gpustack.validation import lint

EKS = ["eks-al2023", "eks-bottlerocket"]

# The containerd config nodeadm writes on the AL2023 NVIDIA AMI, once it finds
# /usr/bin/nvidia-container-runtime (awslabs/amazon-eks-ami nodeadm/internal/containerd/
# config2.template.toml with runtime_config_nvidia.go, 81fec2e), the part GPU pods depend on.
NODEADM_CONTAINERD = """
version = 3
[grpc]
address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.runtime'.containerd]
default_runtime_name = "nvidia"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
SystemdCgroup = true
"""
# The same for Bottlerocket's NVIDIA variants (bottlerocket-os/bottlerocket-core-kit
# packages/containerd/containerd-config-toml_k8s_nvidia_containerd_sock, a10182f).
BOTTLEROCKET_CONTAINERD = """
version = 2
[grpc]
address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri".containerd]
default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
SystemdCgroup = true
BinaryName = "nvidia-oci"
"""
# Bottlerocket's settings model for its device plugin (bottlerocket-os/bottlerocket-settings-sdk
# bottlerocket-settings-models/modeled-types/src/kubernetes.rs NvidiaDevicePluginSettings and its
# enums, 25e4241; `mps` from the bottlerocket.dev 1.54.x settings reference): every setting
# name, and the values each takes.
BOTTLEROCKET_SETTINGS: dict[str, Any] = {
    "pass-device-specs": bool,
    "device-id-strategy": {"uuid", "index"},
    "device-list-strategy": {"envvar", "volume-mounts", "cdi-cri"},
    "device-sharing-strategy": {"none", "time-slicing", "mps"},
    "time-slicing": {
        "replicas": int,
        "rename-by-default": bool,
        "fail-requests-greater-than-one": bool,
    },
    "mps": {"replicas": int, "rename-by-default": bool},
    "device-partitioning-strategy": {"none", "mig"},
    "mig": {"profile": dict},
}
# kubernetes.rs NVIDIAGPU_NAME, MIGPROFILE_NAME and the slice counts MigProfile accepts;
# TIME_SLICING_REPLICAS_MIN.
GPU_MODEL = re.compile(r"^([a-z])(\d+)\.(\d+)gb$")
MIG_PROFILE = re.compile(r"^[0-9]g\.\d+gb$")
MIG_SLICES = {"1", "2", "3", "4", "7"}
MIN_REPLICAS = 2
# eksctl's ClusterConfig (eksctl-io/eksctl pkg/apis/eksctl.io/v1alpha5/types.go, 99984ad): the
# ClusterMeta fields, the node group fields gpustack writes, NodeGroupTaint and the AMI families.
EKSCTL_META = {"name", "region", "version"}
EKSCTL_NODE_GROUP = {"name", "amiFamily", "instanceType", "labels", "taints", "bottlerocket"}
EKSCTL_TAINT = {"key", "value", "effect"}
EKSCTL_AMI_FAMILIES = {"eks-al2023": "AmazonLinux2023", "eks-bottlerocket": "Bottlerocket"}
POD_RESOURCES = "/var/lib/kubelet/pod-resources"  # the kubelet's root on both images
EXAMPLES = ROOT / "examples"


def write(tmp_path: Path, profile: str, body: str = "") -> Path:
    path = tmp_path / "eks.yaml"
    body = textwrap.dedent(body)
    platform = "" if body.startswith("platform:") else f"platform: {{profile: {profile}}}\n"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        + platform
        + body
    )
    return path


def rendered(tmp_path: Path, profile: str, body: str = "") -> Rendering:
    return render(load_stack(write(tmp_path, profile, body)))


def refused(tmp_path: Path, cli: Any, profile: str, body: str, field: str) -> str:
    """The error for a config a profile refuses: at its field and line, exit 2, nothing written."""
    path = write(tmp_path, profile, body)
    with pytest.raises(UserError) as raised:
        load_stack(path)
    assert raised.value.field == field
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert re.search(rf"eks\.yaml:\d+:\d+: {re.escape(field)}", result.output), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    return str(raised.value)


def daemonsets(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in rendering.objects if obj["kind"] == "DaemonSet"}


def pod_specs(rendering: Rendering) -> list[dict[str, Any]]:
    specs = []
    for obj in rendering.objects:
        if obj["kind"] in ("DaemonSet", "Deployment", "Job"):
            specs.append(obj["spec"]["template"]["spec"])
    return specs


def node_settings(rendering: Rendering) -> dict[str, Any]:
    settings = tomllib.loads(rendering.node_files["bottlerocket-settings.toml"])
    nvidia: dict[str, Any] = settings["settings"]["kubelet-device-plugins"]["nvidia"]
    return nvidia


def node_group(rendering: Rendering) -> dict[str, Any]:
    config = YAML(typ="safe").load(rendering.node_files["eksctl-nodegroup.yaml"])
    assert (config["apiVersion"], config["kind"]) == ("eksctl.io/v1alpha5", "ClusterConfig")
    assert set(config["metadata"]) <= EKSCTL_META and {"name", "region"} <= set(config["metadata"])
    [group] = config["managedNodeGroups"]
    assert set(group) <= EKSCTL_NODE_GROUP
    for taint in group.get("taints", []):
        assert set(taint) <= EKSCTL_TAINT
    group_: dict[str, Any] = group
    return group_


def accepted_by_bottlerocket(settings: dict[str, Any]) -> None:
    """Settings Bottlerocket's model deserializes: known names, known values."""
    for name, value in settings.items():
        allowed = BOTTLEROCKET_SETTINGS[name]
        if isinstance(allowed, set):
            assert value in allowed, (name, value)
        elif isinstance(allowed, dict):
            assert set(value) <= set(allowed), (name, value)
            for key, kind in allowed.items():
                if key in value:
                    assert isinstance(value[key], kind), (name, key)
        else:
            assert isinstance(value, allowed), (name, value)
    for section in ("time-slicing", "mps"):
        if section in settings:
            assert settings[section]["replicas"] >= MIN_REPLICAS
            assert settings["device-sharing-strategy"] == section
    for model, profile in settings.get("mig", {}).get("profile", {}).items():
        assert GPU_MODEL.match(model), model
        assert MIG_PROFILE.match(profile) or profile in MIG_SLICES, profile


# ---------------------------------------------------------------------------------------------
# Both profiles: the runtime the node image configures, the node group.


@pytest.mark.parametrize(
    ("profile", "containerd"),
    [("eks-al2023", NODEADM_CONTAINERD), ("eks-bottlerocket", BOTTLEROCKET_CONTAINERD)],
)
def test_gpu_pods_run_under_the_default_runtime_the_node_image_sets(tmp_path, profile, containerd):
    config = tomllib.loads(containerd)
    cri = (
        config["plugins"].get("io.containerd.cri.v1.runtime")
        or config["plugins"]["io.containerd.grpc.v1.cri"]
    )
    default = cri["containerd"]["default_runtime_name"]
    rendering = rendered(tmp_path, profile)
    stack = load_stack(write(tmp_path, profile))
    # nvidia is the default: no RuntimeClass, and no GPU pod names one it would not find.
    assert not [obj for obj in rendering.objects if obj["kind"] == "RuntimeClass"]
    assert not any("runtimeClassName" in spec for spec in pod_specs(rendering))
    assert default in stack.facts.runtime.providedHandlers
    assert stack.facts.runtime.containerdSocket == config["grpc"]["address"]
    # A RuntimeClass asked for by hand names the handler the image configures.
    with_class = rendered(tmp_path, profile, "runtimeClass: {enabled: true}\n")
    [runtime_class] = [o for o in with_class.objects if o["kind"] == "RuntimeClass"]
    assert runtime_class["handler"] == default
    with pytest.raises(UserError, match=r"runtimeClass\.handler"):
        load_stack(write(tmp_path, profile, "runtimeClass: {handler: nvidia-cdi}\n"))


@pytest.mark.parametrize("profile", EKS)
def test_no_driver_or_toolkit_beside_the_node_images(tmp_path, cli, profile):
    rendering = rendered(tmp_path, profile)
    assert not {"nvidia-driver-daemonset", "nvidia-container-toolkit-daemonset"} & set(
        daemonsets(rendering)
    )
    message = refused(tmp_path, cli, profile, "driver: {mode: container}\n", "driver.mode")
    assert "ships the driver" in message
    message = refused(tmp_path, cli, profile, "toolkit: {enabled: true}\n", "toolkit.enabled")
    assert "ships it" in message


@pytest.mark.parametrize("profile", EKS)
def test_the_node_group_carries_the_taints_and_labels_the_manifests_expect(tmp_path, profile):
    body = """\
    nodes:
      selector: {pool.example.com/gpu: a100}
      taints:
      - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
      - {key: dedicated, effect: NoExecute}
      eks: {instanceType: p4d.24xlarge}
    """
    rendering = rendered(tmp_path, profile, body)
    group = node_group(rendering)
    assert group["amiFamily"] == EKSCTL_AMI_FAMILIES[profile]
    assert group["instanceType"] == "p4d.24xlarge"
    assert group["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute"},
    ]
    assert group["labels"]["pool.example.com/gpu"] == "a100"
    # Every GPU DaemonSet tolerates exactly what the nodes get, and selects their label.
    for name, daemonset in daemonsets(rendering).items():
        if name.startswith("nfd"):
            continue
        spec = daemonset["spec"]["template"]["spec"]
        tolerated = {(t["key"], t.get("effect")) for t in spec["tolerations"]}
        assert {("nvidia.com/gpu", "NoSchedule"), ("dedicated", "NoExecute")} <= tolerated, name
        assert "pool.example.com/gpu" in str(spec["affinity"]), name
    readme = rendering.node_files["README.md"]
    assert "eksctl create nodegroup -f eksctl-nodegroup.yaml" in readme
    if profile == "eks-al2023":
        # Self-managed AL2023 nodes register with the same taints and labels through nodeadm
        # (NodeConfig spec.kubelet.flags, appended to the kubelet's: nodeconfig_types.go).
        config = YAML(typ="safe").load(rendering.node_files["nodeadm-nodeconfig.yaml"])
        assert (config["apiVersion"], config["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
        flags = dict(flag.split("=", 1) for flag in config["spec"]["kubelet"]["flags"])
        assert flags["--register-with-taints"].split(",") == [
            "nvidia.com/gpu=present:NoSchedule",
            "dedicated:NoExecute",
        ]
        assert flags["--node-labels"] == "pool.example.com/gpu=a100"


def test_node_group_settings_belong_to_eks_profiles(tmp_path):
    with pytest.raises(UserError) as raised:
        load_stack(write(tmp_path, "kubeadm", "nodes: {eks: {instanceType: g6.xlarge}}\n"))
    assert raised.value.field == "nodes.eks"


@pytest.mark.parametrize("profile", EKS)
def test_the_dcgm_exporter_reads_the_kubelets_pod_resources(tmp_path, profile):
    exporter = daemonsets(rendered(tmp_path, profile))["nvidia-dcgm-exporter"]
    paths = {
        v["hostPath"]["path"]
        for v in exporter["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    }
    assert POD_RESOURCES in paths


@pytest.mark.parametrize("example", EKS)
def test_examples_pass_strict_schemas_and_the_lint(example):
    stack = load_stack(EXAMPLES / f"{example}.yaml")
    rendering = render(stack)
    assert lint.run_for_stack(stack, rendering.objects) == []
    checked = 0
    for obj in rendering.objects:
        try:
            kubernetes_validate.validate(obj, stack.config.platform.kubernetesVersion, strict=True)
            checked += 1
        except SchemaNotFoundError:
            assert "." in obj["apiVersion"].split("/")[0], obj["kind"]
    assert checked > 10


@pytest.mark.shared
@pytest.mark.parametrize("example", EKS)
def test_examples_custom_resources_pass_the_upstream_crd_schemas(example):
    stack = load_stack(EXAMPLES / f"{example}.yaml")
    custom = [obj for obj in render(stack).objects if not is_core(obj["apiVersion"])]
    assert {"ServiceMonitor", "PrometheusRule", "NodeFeatureRule"} <= {o["kind"] for o in custom}
    for obj in custom:
        validate_upstream(obj, stack.config.platform.kubernetesVersion)


def test_profiles_diff_explains_eks_al2023_against_kubeadm(cli):
    result = cli("profiles", "diff", "eks-al2023", "kubeadm")
    assert result.exit_code == 1, result.output  # 1: the profiles differ, as diff(1) says
    rows = {line.split()[0]: line.split()[1:] for line in result.output.splitlines()[1:]}
    assert rows["facts.runtime.runtimeClass"] == ["default", "optional"]
    assert rows["facts.driver.modes"] == ["[preinstalled]", "[preinstalled,", "container]"]
    assert rows["facts.taintMechanism"] == ["eks-node-group", "kubeadm-join"]
    assert "facts.runtime.toolkit.dropInConfigFile" in rows
    listed = cli("profiles", "list").output
    assert re.search(r"^eks-al2023 ", listed, re.M) and re.search(
        r"^eks-bottlerocket ", listed, re.M
    )


# ---------------------------------------------------------------------------------------------
# AL2023: the AMI has no device plugin; gpustack's is NVIDIA's.


def test_al2023_gets_nvidias_plugin_for_the_host_driver_and_the_validator(tmp_path):
    rendering = rendered(tmp_path, "eks-al2023")
    found = daemonsets(rendering)
    assert {"nvidia-device-plugin", "gpu-feature-discovery", "nvidia-dcgm-exporter"} <= set(found)
    assert "nvidia-operator-validator" in found  # the AMI's nvidia-smi is on the host's root
    assert "node/99-nvidia.toml" not in rendering.node_files
    assert sorted(rendering.node_files) == [
        "README.md",
        "eksctl-nodegroup.yaml",
        "nodeadm-nodeconfig.yaml",
    ]
    [config] = [
        o for o in rendering.objects if o["metadata"]["name"] == "nvidia-device-plugin-config"
    ]
    plugin = YAML(typ="safe").load(config["data"]["config.yaml"])
    assert plugin["flags"]["nvidiaDriverRoot"] == "/"
    assert plugin["flags"]["plugin"]["deviceListStrategy"] == "envvar"


def test_al2023_mig_is_the_mig_managers_with_the_nodes_labelled_for_it(tmp_path):
    rendering = rendered(tmp_path, "eks-al2023", "devicePlugin: {migStrategy: single}\n")
    assert "nvidia-mig-manager" in daemonsets(rendering)
    assert node_group(rendering)["labels"]["nvidia.com/mig.config"] == "all-disabled"
    with pytest.raises(UserError) as raised:
        load_stack(
            write(
                tmp_path,
                "eks-al2023",
                "nodes: {eks: {instanceType: p4d.24xlarge, migProfile: {a100.40gb: 1g.5gb}}}\n",
            )
        )
    assert raised.value.field == "nodes.eks.migProfile"


# ---------------------------------------------------------------------------------------------
# Bottlerocket: its own plugin, configured by node settings gpustack writes.


def test_bottlerocket_runs_no_plugin_daemonset_and_refuses_one(tmp_path, cli):
    rendering = rendered(tmp_path, "eks-bottlerocket")
    found = daemonsets(rendering)
    assert "nvidia-device-plugin" not in found
    assert {"gpu-feature-discovery", "nvidia-dcgm-exporter", "nfd-worker"} <= set(found)
    assert "nvidia-operator-validator" not in found
    message = refused(
        tmp_path, cli, "eks-bottlerocket", "devicePlugin: {enabled: true}\n", "devicePlugin.enabled"
    )
    assert "second time" in message


def test_bottlerocket_exporter_is_privileged_as_its_runtime_needs(tmp_path):
    # visible-devices-envvar-when-unprivileged = false (bottlerocket sources/shared-defaults/
    # nvidia-k8s-container-toolkit.toml): unprivileged, NVIDIA_VISIBLE_DEVICES=all gets no GPU.
    exporter = daemonsets(rendered(tmp_path, "eks-bottlerocket"))["nvidia-dcgm-exporter"]
    [container] = exporter["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"] == {"privileged": True}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    al2023 = daemonsets(rendered(tmp_path, "eks-al2023"))["nvidia-dcgm-exporter"]
    assert (
        "privileged" not in al2023["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    )


SHARING = [
    "",
    "devicePlugin: {sharing: {strategy: time-slicing, replicas: 8}}\n",
    "devicePlugin: {sharing: {strategy: time-slicing, renameByDefault: true, "
    "failRequestsGreaterThanOne: false}}\n",
    "devicePlugin: {sharing: {strategy: mps, replicas: 3}}\n",
    "devicePlugin: {deviceListStrategy: cdi-cri}\n",
    "devicePlugin: {deviceListStrategy: envvar}\n",
    "devicePlugin: {migStrategy: single}\n"
    'nodes: {eks: {instanceType: p5.48xlarge, migProfile: {h100.80gb: "7", a100.40gb: 1g.5gb}}}\n',
    "devicePlugin: {migStrategy: single, sharing: {strategy: time-slicing}}\n"
    "nodes: {eks: {instanceType: p4d.24xlarge, migProfile: {a100.40gb: 3g.20gb}}}\n",
]


@pytest.mark.parametrize("body", SHARING)
def test_bottlerocket_settings_are_what_its_model_accepts_and_the_config_says(tmp_path, body):
    rendering = rendered(tmp_path, "eks-bottlerocket", body)
    stack = load_stack(write(tmp_path, "eks-bottlerocket", body))
    settings = node_settings(rendering)
    accepted_by_bottlerocket(settings)
    # The eksctl node group carries the very same settings.
    group = node_group(rendering)
    assert group["bottlerocket"]["settings"]["kubelet-device-plugins"]["nvidia"] == settings
    plugin = stack.config.devicePlugin
    sharing = plugin.sharing
    assert settings.get("device-sharing-strategy", "none") == sharing.strategy
    if sharing.strategy == "time-slicing":
        assert settings["time-slicing"] == {
            "replicas": sharing.replicas,
            "rename-by-default": sharing.renameByDefault,
            "fail-requests-greater-than-one": sharing.failRequestsGreaterThanOne,
        }
    if sharing.strategy == "mps":
        assert settings["mps"] == {"replicas": sharing.replicas, "rename-by-default": False}
    if plugin.deviceListStrategy != "auto":
        assert settings["device-list-strategy"] == plugin.deviceListStrategy
    else:
        assert "device-list-strategy" not in settings  # Bottlerocket's default, volume-mounts
    mig = plugin.migStrategy == "single"
    assert settings.get("device-partitioning-strategy", "none") == ("mig" if mig else "none")
    if mig:
        assert settings["mig"]["profile"] == dict(stack.config.nodes.eks.migProfile)
    # GPUs go to pods by UUID, which the DCGM exporter maps back to them.
    assert settings["device-id-strategy"] == "uuid"
    # No MIG manager of NVIDIA's: Bottlerocket partitions; GFD and the lint agree.
    assert "nvidia-mig-manager" not in daemonsets(rendering)
    gfd = daemonsets(rendering)["gpu-feature-discovery"]["spec"]["template"]["spec"]
    assert {"name": "MIG_STRATEGY", "value": plugin.migStrategy} in gfd["containers"][0]["env"]
    assert lint.run_for_stack(stack, rendering.objects) == []


def test_gfd_labels_the_sharing_bottlerockets_plugin_applies(tmp_path):
    body = "devicePlugin: {sharing: {strategy: time-slicing, replicas: 6, renameByDefault: true}}\n"
    rendering = rendered(tmp_path, "eks-bottlerocket", body)
    [config_map] = [
        o for o in rendering.objects if o["metadata"]["name"] == "gpu-feature-discovery-config"
    ]
    gfd_sharing = YAML(typ="safe").load(config_map["data"]["config.yaml"])["sharing"]["timeSlicing"]
    settings = node_settings(rendering)["time-slicing"]
    assert gfd_sharing["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": settings["replicas"]}
    ]
    assert gfd_sharing["renameByDefault"] == settings["rename-by-default"]
    # The smoke test asks for what the plugin then advertises.
    job = rendered(tmp_path, "eks-bottlerocket", body + "smokeTest: {enabled: true}\n")
    [smoke] = [o for o in job.objects if o["kind"] == "Job"]
    limits = smoke["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu.shared": 1}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ("devicePlugin: {migStrategy: mixed}\n", "devicePlugin.migStrategy", "'single' only"),
        (
            "devicePlugin: {migStrategy: single}\n",
            "devicePlugin.migStrategy",
            "nodes.eks.migProfile",
        ),
        (
            "nodes: {eks: {instanceType: p4d.24xlarge, migProfile: {a100.40gb: 1g.5gb}}}\n",
            "nodes.eks.migProfile",
            "without MIG",
        ),
        (
            "devicePlugin: {deviceListStrategy: cdi-annotations}\n",
            "devicePlugin.deviceListStrategy",
            "no device list strategy",
        ),
        (
            'platform: {profile: eks-bottlerocket, kubernetesVersion: "1.28"}\n'
            "devicePlugin: {deviceListStrategy: cdi-cri}\n",
            "devicePlugin.deviceListStrategy",
            "drops",
        ),
        (
            "devicePlugin: {resources: {requests: {cpu: 10m}}}\n",
            "devicePlugin.resources",
            "host service",
        ),
        (
            "gfd: {enabled: false}\ndevicePlugin: {version: v0.17.0}\n",
            "devicePlugin.version",
            "Bottlerocket release",
        ),
        ("migManager: {enabled: true}\n", "migManager.enabled", "node OS"),
    ],
)
def test_bottlerocket_refuses_what_its_plugin_cannot_honour(tmp_path, cli, body, field, words):
    assert words in refused(tmp_path, cli, "eks-bottlerocket", body, field)


def test_a_plugin_version_still_pins_gfd_on_bottlerocket(tmp_path):
    rendering = rendered(tmp_path, "eks-bottlerocket", "devicePlugin: {version: v0.17.0}\n")
    gfd = daemonsets(rendering)["gpu-feature-discovery"]["spec"]["template"]["spec"]
    assert gfd["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
    assert "v0.17.0" not in rendering.node_files["bottlerocket-settings.toml"]


# eksctl installs its own copy of NVIDIA's device plugin with a node group of NVIDIA GPU
# instances on AL2 and AL2023 (not Bottlerocket, whose OS runs the plugin), unless
# `--install-nvidia-plugin=false` (eksctl-io/eksctl pkg/eks/tasks.go ClusterTasksForNodeGroups,
# pkg/ctl/cmdutils/nodegroup_flags.go: default true; the flag is allowed with -f, configfile.go).
EKSCTL_OWN_PLUGIN_OFF = "--install-nvidia-plugin=false"


@pytest.mark.parametrize(
    ("profile", "body", "off"),
    [
        ("eks-al2023", "", True),
        # The DRA driver must not share nodes with a device plugin either.
        (
            "eks-al2023",
            "platform: {profile: eks-al2023, kubernetesVersion: '1.34'}\n"
            "gpuAllocation: dra\ndevicePlugin: {enabled: false}\n",
            True,
        ),
        ("eks-bottlerocket", "", False),
    ],
)
def test_eksctl_adds_no_second_device_plugin(tmp_path, profile, body, off):
    readme = rendered(tmp_path, profile, body).node_files["README.md"]
    command = re.search(r"`(eksctl create nodegroup [^`]*)`", readme)
    assert command is not None, readme
    assert (EKSCTL_OWN_PLUGIN_OFF in command.group(1).split()) is off
    if off:
        assert "kubectl -n kube-system delete daemonset nvidia-device-plugin-daemonset" in readme
