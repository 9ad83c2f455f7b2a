"""Platform specifics: GKE driver installers and quota, OpenShift entitlement, node/ artifacts.

Upstream manifests (shared refs) and CRD schemas (shared crd-schemas) are the oracles here, so a
test fails when the output drifts from what the platforms themselves ship or accept.
"""

from __future__ import annotations

import base64
import json
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from conftest import SHARED, write_config
from kubernetes_validate.utils import SchemaNotFoundError
from ruamel.yaml import YAML

from gpustack.build.pipeline import Rendering, files, render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack

REFS = SHARED / "refs"
CRD_SCHEMAS = SHARED / "crd-schemas"
PROFILES = ("openshift", "gke-cos", "gke-ubuntu", "rke2", "kubeadm")
TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "nodetype", "value": "gpu", "effect": "NoSchedule"},
]
# Not a real certificate: distinctive lines that must never reach the terminal.
PEM = (
    b"-----BEGIN CERTIFICATE-----\n"
    b"TUlJRGNlcnRpZmljYXRlU2VjcmV0Qm9keUxpbmVPbmVGb3JHcHVzdGFja1Rlc3Rz\n"
    b"-----END CERTIFICATE-----\n"
    b"-----BEGIN RSA PRIVATE KEY-----\n"
    b"UHJpdmF0ZUtleVNlY3JldEJvZHlMaW5lVHdvRm9yR3B1c3RhY2tUZXN0c09ubHk=\n"
    b"-----END RSA PRIVATE KEY-----\n"
)
GKE_PLUGIN_OPT_OUT = 'selector: {gke-no-default-nvidia-gpu-device-plugin: "true"}'


def rendered(tmp_path: Path, profile: str, body: str = "") -> Rendering:
    return render(load_stack(write_config(tmp_path, profile, body)))


def entitled_config(tmp_path: Path) -> Path:
    (tmp_path / "entitlement.pem").write_bytes(PEM)
    return write_config(
        tmp_path, "openshift", "entitlement: {enabled: true, pemFile: entitlement.pem}\n"
    )


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        obj
        for obj in objects
        if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name)
    ]


def load_yaml(text: str) -> Any:
    return YAML(typ="safe").load(text)


def load_all_yaml(text: str) -> list[Any]:
    return list(YAML(typ="safe").load_all(text))


# ---------------------------------------------------------------------------------------------
# GKE


def installer_of(rendering: Rendering) -> dict[str, Any]:
    [installer] = [
        obj
        for obj in find(rendering.objects, "DaemonSet")
        if obj["metadata"]["namespace"] == "kube-system"
    ]
    return installer


def host_paths(pod: dict[str, Any]) -> dict[str, str]:
    return {volume["name"]: volume["hostPath"]["path"] for volume in pod["volumes"]}


def affinity_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    [term] = terms["nodeSelectorTerms"]
    return term["matchExpressions"]


@pytest.mark.shared
@pytest.mark.parametrize(
    ("profile", "upstream", "os_name"),
    [
        ("gke-cos", "cos-daemonset-preloaded.yaml", "cos"),
        ("gke-ubuntu", "ubuntu-daemonset-preloaded.yaml", "ubuntu"),
    ],
)
def test_gke_installer_matches_upstream_and_selects_its_os(tmp_path, profile, upstream, os_name):
    rendering = rendered(tmp_path, profile, "driver: {mode: gke-installer}\n")
    ours = installer_of(rendering)["spec"]["template"]["spec"]
    theirs = load_yaml((REFS / "gke" / upstream).read_text())["spec"]["template"]["spec"]

    assert ours.get("hostNetwork") == theirs.get("hostNetwork")
    assert ours.get("hostPID") == theirs.get("hostPID")
    assert ours["priorityClassName"] == theirs["priorityClassName"] == "system-node-critical"
    assert ours["tolerations"] == [{"operator": "Exists"}]
    assert host_paths(ours) == host_paths(theirs)
    assert [c["name"] for c in ours["initContainers"]] == [
        c["name"] for c in theirs["initContainers"]
    ]
    for mine, upstream_container in zip(ours["initContainers"], theirs["initContainers"]):
        assert mine["image"] == upstream_container["image"]
        assert mine.get("imagePullPolicy") == upstream_container.get("imagePullPolicy")
        assert mine.get("env") == upstream_container.get("env")
        assert sorted((m["name"], m["mountPath"]) for m in mine["volumeMounts"]) == sorted(
            (m["name"], m["mountPath"]) for m in upstream_container["volumeMounts"]
        )
    assert [c["image"] for c in ours["containers"]] == [c["image"] for c in theirs["containers"]]

    expressions = affinity_terms(ours)
    for expression in affinity_terms(theirs):
        assert expression in expressions
    # Upstream lacks the OS selector; ours keeps each installer on its own node image.
    assert {
        "key": "cloud.google.com/gke-os-distribution",
        "operator": "In",
        "values": [os_name],
    } in expressions


def test_cos_and_ubuntu_installers_differ(tmp_path):
    cos = installer_of(rendered(tmp_path, "gke-cos", "driver: {mode: gke-installer}\n"))
    ubuntu = installer_of(rendered(tmp_path, "gke-ubuntu", "driver: {mode: gke-installer}\n"))
    cos_pod, ubuntu_pod = cos["spec"]["template"]["spec"], ubuntu["spec"]["template"]["spec"]
    assert cos_pod["hostNetwork"] and cos_pod["hostPID"]
    assert "hostNetwork" not in ubuntu_pod and "hostPID" not in ubuntu_pod
    assert "partition-gpus" in [c["name"] for c in cos_pod["initContainers"]]
    assert [c["name"] for c in ubuntu_pod["initContainers"]] == ["nvidia-driver-installer"]
    assert "/var/lib/cos-tools" in host_paths(cos_pod).values()
    assert "/boot" in host_paths(ubuntu_pod).values()
    confidential = "cloud.google.com/gke-confidential-nodes-instance-type"
    assert confidential in [e["key"] for e in affinity_terms(cos_pod)]
    assert confidential not in [e["key"] for e in affinity_terms(ubuntu_pod)]
    # Both can live in kube-system of a cluster with COS and Ubuntu GPU pools.
    assert cos["metadata"]["name"] != ubuntu["metadata"]["name"]
    assert cos["spec"]["selector"] != ubuntu["spec"]["selector"]


def test_installer_is_privileged_only_in_its_init_containers(tmp_path):
    for profile in ("gke-cos", "gke-ubuntu"):
        pod = installer_of(rendered(tmp_path, profile, "driver: {mode: gke-installer}\n"))
        spec = pod["spec"]["template"]["spec"]
        assert all(c["securityContext"]["privileged"] for c in spec["initContainers"])
        [pause] = spec["containers"]
        assert "privileged" not in pause["securityContext"]
        assert pause["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("driver", ["", "driver: {mode: gke-managed}\n"])
def test_no_installer_when_gke_manages_the_driver(tmp_path, driver):
    rendering = rendered(tmp_path, "gke-cos", driver)
    assert not [o for o in rendering.objects if o["metadata"].get("namespace") == "kube-system"]
    pool = rendering.node_files["gke-node-pool.sh"]
    assert "gpu-driver-version=default" in pool


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_no_nvidia_device_plugin_on_gke_by_default(tmp_path, profile):
    rendering = rendered(tmp_path, profile)
    images = json.dumps(rendering.objects)
    assert "k8s-device-plugin" not in images
    assert not find(rendering.objects, "DaemonSet", "nvidia-device-plugin")


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_nvidia_device_plugin_on_gke_is_refused(tmp_path, cli, profile):
    """Without the Container Toolkit and CDI, NVIDIA's plugin on GKE takes its dev root from the
    driver root /home/kubernetes/bin/nvidia (upstream api/config/v1/config.go), so GPU pods get
    device nodes that do not exist and no driver libraries: exit 2, nothing written."""
    config = write_config(
        tmp_path, profile, f"nodes:\n  {GKE_PLUGIN_OPT_OUT}\ndevicePlugin: {{enabled: true}}\n"
    )
    with pytest.raises(UserError) as raised:
        load_stack(config)
    assert raised.value.field == "devicePlugin.enabled"
    assert "Container Toolkit" in str(raised.value)
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "devicePlugin.enabled" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_gke_admits_critical_pods_through_a_scoped_quota(tmp_path, profile):
    rendering = rendered(tmp_path, profile, "dcgmExporter: {enabled: true}\n")
    [quota] = find(rendering.objects, "ResourceQuota")
    assert quota["metadata"]["namespace"] == "gpu-system"
    [scope] = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["scopeName"] == "PriorityClass" and scope["operator"] == "In"
    critical = {
        obj["spec"]["template"]["spec"]["priorityClassName"]
        for obj in rendering.objects
        if obj["kind"] == "DaemonSet" and obj["metadata"]["namespace"] == "gpu-system"
    }
    assert critical <= set(scope["values"])
    assert "system-node-critical" in scope["values"]
    assert int(quota["spec"]["hard"]["pods"]) >= 1000


@pytest.mark.parametrize("profile", ["openshift", "rke2", "kubeadm"])
def test_no_quota_off_gke(tmp_path, profile):
    assert not find(rendered(tmp_path, profile).objects, "ResourceQuota")


# ---------------------------------------------------------------------------------------------
# OpenShift entitlement


def decoded(machine_config: dict[str, Any]) -> tuple[str, bytes, dict[str, Any]]:
    [file] = machine_config["spec"]["config"]["storage"]["files"]
    prefix, _, payload = file["contents"]["source"].partition(";base64,")
    assert prefix == "data:text/plain;charset=utf-8"
    return file["path"], base64.b64decode(payload, validate=True), file


def test_entitlement_machine_configs_carry_the_pem(tmp_path):
    rendering = render(load_stack(entitled_config(tmp_path)))
    configs = {mc["metadata"]["name"]: mc for mc in find(rendering.objects, "MachineConfig")}
    assert set(configs) == {"50-rhsm-conf", "50-entitlement-pem", "50-entitlement-key-pem"}
    expected_paths = {
        "50-rhsm-conf": "/etc/rhsm/rhsm.conf",
        "50-entitlement-pem": "/etc/pki/entitlement/entitlement.pem",
        "50-entitlement-key-pem": "/etc/pki/entitlement/entitlement-key.pem",
    }
    for name, machine_config in configs.items():
        assert machine_config["apiVersion"] == "machineconfiguration.openshift.io/v1"
        # The GPU nodes' own pool (worker-gpu), not every worker.
        assert (
            machine_config["metadata"]["labels"]["machineconfiguration.openshift.io/role"]
            == "worker-gpu"
        )
        assert machine_config["spec"]["config"]["ignition"] == {"version": "3.2.0"}
        path, content, file = decoded(machine_config)
        assert path == expected_paths[name]
        assert file["mode"] == 420
        if name == "50-rhsm-conf":
            assert b"baseurl = https://cdn.redhat.com" in content
        else:
            assert content == PEM


@pytest.mark.shared
def test_entitlement_machine_configs_match_the_crd_schema(tmp_path):
    schema = json.loads(
        (CRD_SCHEMAS / "machineconfiguration.openshift.io" / "machineconfig_v1.json").read_text()
    )
    rendering = render(load_stack(entitled_config(tmp_path)))
    written = files(rendering)
    machine_configs = [
        load_yaml(content.decode())
        for name, content in written.items()
        if name.startswith("machineconfig-")
    ]
    assert len(machine_configs) == 3
    for machine_config in machine_configs:
        jsonschema.validate(machine_config, schema)
        # YAML 1.1 parsers would read an octal 0644 differently: the file must say 420.
        assert decoded(machine_config)[2]["mode"] == 420


def test_no_machine_configs_without_entitlement(tmp_path):
    assert not find(rendered(tmp_path, "openshift").objects, "MachineConfig")


def test_render_never_prints_the_pem_but_warns(tmp_path, cli):
    config = entitled_config(tmp_path)
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    printed = result.output + (result.stderr or "")
    secret_lines = [line for line in PEM.decode().splitlines() if not line.startswith("-----")]
    for line in secret_lines:
        assert line not in printed
    assert base64.b64encode(PEM).decode() not in printed
    assert "warning:" in printed and "plain text" in printed
    assert "[entitlement-in-output] entitlement is enabled" in printed
    on_disk = (tmp_path / "out" / "lab" / "machineconfig-50-entitlement-pem.yaml").read_text()
    assert base64.b64encode(PEM).decode() in on_disk


# ---------------------------------------------------------------------------------------------
# node/ artifacts


def taints_config(controlPlane: bool = False) -> str:
    taints = "".join(
        f"  - {{key: {t['key']}, value: {t['value']}, effect: {t['effect']}}}\n" for t in TAINTS
    )
    plane = "  controlPlane: true\n" if controlPlane else ""
    return f"nodes:\n{plane}  taints:\n{taints}"


def node_taints(profile: str, node_files: dict[str, str]) -> list[list[dict[str, Any]]]:
    """Every taint list the node files of `profile` would put on a node, as core/v1 taints."""

    def parse(text: str) -> dict[str, Any]:
        key_value, effect = text.rsplit(":", 1)
        key, value = key_value.split("=", 1)
        return {"key": key, "value": value, "effect": effect}

    if profile == "kubeadm":
        return [
            load_yaml(node_files[name])["nodeRegistration"]["taints"]
            for name in ("join-configuration.yaml", "init-configuration.yaml")
            if name in node_files
        ]
    if profile == "rke2":
        return [[parse(t) for t in load_yaml(node_files["rke2-agent-config.yaml"])["node-taint"]]]
    if profile == "openshift":
        return [
            load_yaml(node_files["machineset-patch.yaml"])["spec"]["template"]["spec"]["taints"]
        ]
    effects = {
        "NO_SCHEDULE": "NoSchedule",
        "PREFER_NO_SCHEDULE": "PreferNoSchedule",
        "NO_EXECUTE": "NoExecute",
    }
    pool = load_yaml(node_files["containernodepool.yaml"])["spec"]["nodeConfig"]["taint"]
    [flag] = [
        line for line in node_files["gke-node-pool.sh"].splitlines() if "--node-taints=" in line
    ]
    gcloud = flag.split("=", 1)[1].strip(" \\'").split(",")
    return [[{**t, "effect": effects[t["effect"]]} for t in pool], [parse(t) for t in gcloud]]


@pytest.mark.parametrize("profile", PROFILES)
def test_node_files_carry_exactly_the_configured_taints(tmp_path, profile):
    rendering = rendered(tmp_path, profile, taints_config())
    lists = node_taints(profile, rendering.node_files)
    assert lists
    for taints in lists:
        assert taints == TAINTS


@pytest.mark.parametrize("profile", PROFILES)
def test_node_files_are_marked_and_not_in_the_kustomization(tmp_path, profile):
    written = files(rendered(tmp_path, profile, taints_config()))
    node_files = [name for name in written if name.startswith("node/")]
    assert "node/README.md" in node_files and len(node_files) >= 2
    kustomization = load_yaml(written["kustomization.yaml"].decode())
    assert not [name for name in kustomization["resources"] if name.startswith("node/")]
    for name in node_files:
        assert b"Generated by gpustack" in written[name].split(b"\n", 1)[0], name
    readme = written["node/README.md"].decode()
    for name in node_files:
        if name != "node/README.md":
            assert f"`{name.removeprefix('node/')}`" in readme


def test_kubeadm_join_configuration_has_the_v1beta4_shape(tmp_path):
    rendering = rendered(
        tmp_path, "kubeadm", taints_config() + "  selector: {gpu.example.com/pool: a100}\n"
    )
    assert "init-configuration.yaml" not in rendering.node_files
    [join] = load_all_yaml(rendering.node_files["join-configuration.yaml"])
    assert join["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert join["kind"] == "JoinConfiguration"
    registration = join["nodeRegistration"]
    assert registration["criSocket"] == "unix:///run/containerd/containerd.sock"
    # v1beta4: a list of {name, value}, no longer a map.
    assert registration["kubeletExtraArgs"] == [
        {"name": "node-labels", "value": "gpu.example.com/pool=a100"}
    ]


# kubeadm's config API per release (kubernetes.io, "kubeadm Configuration (v1beta4)": v1beta4
# from kubeadm 1.31; "kubeadm Configuration (v1beta3)": kubeletExtraArgs is a map[string]string).
@pytest.mark.parametrize(
    ("version", "api", "labels"),
    [
        ("1.29", "v1beta3", {"node-labels": "gpu.example.com/pool=a100"}),
        ("1.30", "v1beta3", {"node-labels": "gpu.example.com/pool=a100"}),
        ("1.31", "v1beta4", [{"name": "node-labels", "value": "gpu.example.com/pool=a100"}]),
    ],
)
def test_kubeadm_files_use_the_config_api_kubeadm_of_the_target_version_reads(
    tmp_path, version, api, labels
):
    body = (
        taints_config(controlPlane=True) + "  selector: {gpu.example.com/pool: a100}\n"
    ).replace("nodes:", f'platform: {{profile: kubeadm, kubernetesVersion: "{version}"}}\nnodes:')
    path = tmp_path / "lab.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n" + body
    )
    rendering = render(load_stack(path))
    for name in ("join-configuration.yaml", "init-configuration.yaml"):
        [document] = load_all_yaml(rendering.node_files[name])
        assert document["apiVersion"] == f"kubeadm.k8s.io/{api}", name
        assert document["nodeRegistration"]["kubeletExtraArgs"] == labels, name
        assert [t["key"] for t in document["nodeRegistration"]["taints"]] == [
            t["key"] for t in TAINTS
        ]
    readme = rendering.node_files["README.md"]
    assert f"`kubeadm.k8s.io/{api}`" in readme
    assert f"`kubeadm.k8s.io/{api}` ClusterConfiguration" in readme


def test_single_node_control_plane_gets_an_init_configuration(tmp_path):
    rendering = rendered(tmp_path, "kubeadm", taints_config(controlPlane=True))
    [init] = load_all_yaml(rendering.node_files["init-configuration.yaml"])
    assert init["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert init["kind"] == "InitConfiguration"
    keys = [taint["key"] for taint in init["nodeRegistration"]["taints"]]
    # An explicit list replaces kubeadm's default control-plane taint: dropped on purpose.
    assert "node-role.kubernetes.io/control-plane" not in keys
    readme = rendering.node_files["README.md"]
    assert "node-role.kubernetes.io/control-plane" in readme
    assert "ExtendedResourceToleration" in readme
    # The GPU workloads tolerate the control-plane taint wherever it is kept.
    plugin = find(rendering.objects, "DaemonSet", "nvidia-device-plugin")[0]
    tolerated = [t["key"] for t in plugin["spec"]["template"]["spec"]["tolerations"]]
    assert "node-role.kubernetes.io/control-plane" in tolerated


@pytest.mark.parametrize("tainted", [True, False])
def test_the_init_configuration_note_says_what_its_taint_list_does(tmp_path, tainted):
    config = (
        taints_config(controlPlane=True) if tainted else "nodes: {controlPlane: true, taints: []}\n"
    )
    rendering = rendered(tmp_path, "kubeadm", config)
    [init] = load_all_yaml(rendering.node_files["init-configuration.yaml"])
    readme = rendering.node_files["README.md"]
    assert bool(init["nodeRegistration"]["taints"]) == tainted
    assert ("The GPU taints stay" in readme) == tainted
    assert ("the list is empty, so the node takes every pod" in readme) == (not tainted)


@pytest.mark.parametrize("name", ["nvidia", "nvidia-gpu"])
def test_rke2_says_which_release_provides_the_runtime_class_it_leaves_to_rke2(tmp_path, name):
    rendering = rendered(tmp_path, "rke2", f"runtimeClass: {{name: {name}}}\n")
    classes = [o for o in rendering.objects if o["kind"] == "RuntimeClass"]
    leaves_it = not classes  # RKE2 ships `nvidia` (rancher/rke2 #7242), not `nvidia-gpu`
    assert leaves_it == (name == "nvidia")
    readme = rendering.node_files["README.md"]
    assert ("v1.31.5" in readme and f"runtimeclass {name}" in readme) == leaves_it


def test_containerd_drop_in_registers_the_runtime_class_handler(tmp_path):
    rendering = rendered(tmp_path, "kubeadm", "runtimeClass: {handler: nvidia-gpu}\n")
    drop_in = tomllib.loads(rendering.node_files["99-nvidia.toml"])
    assert drop_in["version"] == 2
    runtimes = drop_in["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["nvidia-gpu"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    [runtime_class] = find(rendering.objects, "RuntimeClass")
    assert runtime_class["handler"] == "nvidia-gpu"


def test_rke2_agent_config_labels_the_selected_nodes(tmp_path):
    rendering = rendered(tmp_path, "rke2", "nodes:\n  selector: {gpu.example.com/pool: a100}\n")
    config = load_yaml(rendering.node_files["rke2-agent-config.yaml"])
    assert config["node-label"] == ["gpu.example.com/pool=a100"]


@pytest.mark.shared
def test_openshift_machineset_patch_matches_the_machineset_schema(tmp_path):
    schema = json.loads(
        (CRD_SCHEMAS / "machine.openshift.io" / "machineset_v1beta1.json").read_text()
    )
    rendering = rendered(
        tmp_path, "openshift", taints_config() + "  selector: {gpu.example.com/pool: a100}\n"
    )
    patch = load_yaml(rendering.node_files["machineset-patch.yaml"])
    machine_set = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {"name": "gpu", "namespace": "openshift-machine-api"},
        **patch,
    }
    jsonschema.validate(machine_set, schema)
    # Not the nvidia.com/gpu.deploy.* labels: the Machine API would copy them back onto the node
    # after every pause of the driver manager.
    # The node role the GPU MachineConfigPool selects its nodes by.
    assert patch["spec"]["template"]["spec"]["metadata"]["labels"] == {
        "gpu.example.com/pool": "a100",
        "node-role.kubernetes.io/worker-gpu": "",
    }


def test_openshift_readme_warns_that_entitlement_reboots_workers(tmp_path):
    rendering = render(load_stack(entitled_config(tmp_path)))
    readme = rendering.node_files["README.md"]
    assert "drain and reboot the `worker-gpu` pool's GPU nodes" in readme
    assert "maxUnavailable" in readme
    assert "drain and reboot" not in rendered(tmp_path, "openshift").node_files["README.md"]


@pytest.mark.shared
@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_gke_node_pool_manifest_matches_the_config_connector_schema(tmp_path, profile):
    schema = json.loads(
        (
            CRD_SCHEMAS / "container.cnrm.cloud.google.com" / "containernodepool_v1beta1.json"
        ).read_text()
    )
    rendering = rendered(tmp_path, profile, taints_config())
    pool = load_yaml(rendering.node_files["containernodepool.yaml"])
    jsonschema.validate(pool, schema)
    image = {"gke-cos": "COS_CONTAINERD", "gke-ubuntu": "UBUNTU_CONTAINERD"}[profile]
    assert pool["spec"]["nodeConfig"]["imageType"] == image
    assert f"--image-type={image}" in rendering.node_files["gke-node-pool.sh"]


# ---------------------------------------------------------------------------------------------
# Strict schemas for everything these components emit


@pytest.mark.parametrize(
    ("profile", "body"),
    [
        ("gke-cos", "driver: {mode: gke-installer}\n"),
        ("gke-ubuntu", "driver: {mode: gke-installer}\n"),
        ("openshift", "entitlement: {enabled: true, pemFile: entitlement.pem}\n"),
    ],
)
def test_core_objects_pass_strict_validation(tmp_path, profile, body):
    (tmp_path / "entitlement.pem").write_bytes(PEM)
    rendering = rendered(tmp_path, profile, body)
    checked = 0
    for obj in rendering.objects:
        try:
            kubernetes_validate.validate(obj, "1.31", strict=True)
            checked += 1
        except SchemaNotFoundError:
            # Custom resources have no schema in kubernetes-validate; core kinds always do.
            assert "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].endswith(
                "k8s.io/v1"
            ), obj["kind"]
    assert checked >= 2


def test_user_gke_profile_without_installer_os_is_a_clear_error(tmp_path, cli):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "gke-custom.yaml").write_text(
        textwrap.dedent("""\
        apiVersion: gpustack.dev/v1alpha1
        kind: Profile
        extends: gke-cos
        metadata: {name: gke-custom, description: GKE with an unknown node image}
        facts:
          driver: {installerOS: null}
        """)
    )
    config = write_config(tmp_path, "gke-custom", "driver: {mode: gke-installer}\n")
    result = cli("render", config, "--profiles-dir", profiles, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "installerOS" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("version", "enabled", "warned"),
    [
        ("1.31", True, False),
        ("1.32", True, True),
        ("1.33", False, False),
    ],
)
def test_render_warns_when_gkes_managed_dcgm_exporter_would_run_beside_ours(
    cli, tmp_path, version, enabled, warned
):
    config = tmp_path / "gke.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: gke}\n"
        f'platform: {{profile: gke-ubuntu, kubernetesVersion: "{version}"}}\n'
        f"dcgmExporter: {{enabled: {str(enabled).lower()}}}\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert ("managed DCGM exporter too" in result.stderr) == warned
    # A warning with the rule it comes from, as lint's are printed.
    assert ("warning: gke: [managed-dcgm-exporter] Kubernetes" in result.stderr) == warned
