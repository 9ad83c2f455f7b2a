"""MIG: the MIG manager, its configs, the node label that drives it, and the GPU clients it stops."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED, stack_for, validate_upstream, yaml_document
from manifests import pod_spec, schedulable

from gpustack.build.pipeline import render

OPERATOR = SHARED / "refs" / "gpu-operator"
MIG_PROFILES = ["kubeadm", "rke2", "openshift"]


def load(text: str) -> Any:
    return yaml_document(text)


def objects(tmp_path: Path, profile: str, **sections: Any) -> list[dict[str, Any]]:
    return render(stack_for(tmp_path, profile, **sections)).objects


def find(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in items if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def mig_config(items: list[dict[str, Any]]) -> dict[str, Any]:
    manager = find(items, "DaemonSet", "nvidia-mig-manager")
    [container] = pod_spec(manager)["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    directory, _, key = env["CONFIG_FILE"].rpartition("/")
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    [volume] = [v for v in pod_spec(manager)["volumes"] if v["name"] == mount["name"]]
    config_map = find(items, "ConfigMap", volume["configMap"]["name"])
    return load(config_map["data"][key])  # type: ignore[no-any-return]


def normalized(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mig-parted reads a single device-filter string as a one-item list."""
    result = []
    for entry in entries:
        entry = dict(entry)
        if isinstance(entry.get("device-filter"), str):
            entry["device-filter"] = [entry["device-filter"]]
        result.append(entry)
    return result


@pytest.mark.parametrize("profile", MIG_PROFILES)
@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_a_mig_strategy_brings_the_mig_manager(tmp_path, profile, strategy):
    items = objects(tmp_path, profile, devicePlugin={"migStrategy": strategy})
    manager = find(items, "DaemonSet", "nvidia-mig-manager")
    assert pod_spec(manager)["containers"][0]["securityContext"] == {"privileged": True}
    config = mig_config(items)
    assert config["version"] == "v1"
    assert "all-disabled" in config["mig-configs"]


@pytest.mark.shared
@pytest.mark.parametrize("profile", MIG_PROFILES)
def test_the_mig_stack_passes_the_upstream_schemas(tmp_path, profile):
    for obj in objects(tmp_path, profile, devicePlugin={"migStrategy": "mixed"}):
        validate_upstream(obj)


@pytest.mark.parametrize("profile", MIG_PROFILES)
def test_no_mig_manager_without_a_mig_strategy(tmp_path, profile):
    items = objects(tmp_path, profile)
    assert not [o for o in items if "mig-manager" in o["metadata"]["name"]]


@pytest.mark.shared
def test_built_in_mig_configs_are_the_upstream_defaults(tmp_path):
    upstream_map = load((OPERATOR / "state-mig-manager__0400_configmap.yaml").read_text())
    upstream = load(upstream_map["data"]["config.yaml"])
    ours = mig_config(objects(tmp_path, "kubeadm", devicePlugin={"migStrategy": "single"}))
    assert ours["version"] == upstream["version"]
    assert set(ours["mig-configs"]) == set(upstream["mig-configs"])
    for name, entries in upstream["mig-configs"].items():
        assert normalized(ours["mig-configs"][name]) == normalized(entries), name


@pytest.mark.shared
def test_mig_manager_image_is_the_operators(tmp_path):
    values = load((OPERATOR / "helm__values.yaml").read_text())["migManager"]
    manager = find(
        objects(tmp_path, "rke2", devicePlugin={"migStrategy": "single"}),
        "DaemonSet",
        "nvidia-mig-manager",
    )
    expected = f"{values['repository']}/{values['image']}:{values['version']}"
    assert pod_spec(manager)["containers"][0]["image"] == expected


@pytest.mark.shared
@pytest.mark.parametrize("profile", MIG_PROFILES)
@pytest.mark.parametrize(
    ("ours", "operand"),
    [
        ("nvidia-device-plugin", "state-device-plugin__0500_daemonset.yaml"),
        ("gpu-feature-discovery", "gpu-feature-discovery__0500_daemonset.yaml"),
        ("nvidia-dcgm-exporter", "state-dcgm-exporter__0800_daemonset.yaml"),
    ],
)
def test_gpu_clients_leave_a_node_the_mig_manager_pauses(tmp_path, profile, ours, operand):
    """The MIG manager stops the GPU Operator's operands by flipping the node label their
    nodeSelector names to paused-for-mig-change, and waits for their `app` pods to go. gpustack's
    own DaemonSets answer to the same label and carry the same `app` label.

    They leave a node whose label is paused or "false" and keep one without the label (no
    controller labels nodes here). The manager pauses only a "true" label, so the node/ files
    register it, except on OpenShift, whose Machine API re-applies node labels."""
    upstream = load((OPERATOR / operand).read_text())
    [deploy_label] = upstream["spec"]["template"]["spec"]["nodeSelector"]
    app = upstream["spec"]["template"]["metadata"]["labels"]["app"]
    items = objects(tmp_path, profile, devicePlugin={"migStrategy": "single"})
    workload = find(items, "DaemonSet", ours)
    assert workload["spec"]["template"]["metadata"]["labels"]["app"] == app
    manager = find(items, "DaemonSet", "nvidia-mig-manager")
    gpu_node = {
        key: values[0]
        for term in pod_spec(manager)["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        for expression in term["matchExpressions"]
        if expression["operator"] == "In"
        for key, values in [(expression["key"], expression["values"])]
    }
    assert schedulable(workload, {**gpu_node, deploy_label: "true"})
    assert schedulable(workload, gpu_node)
    if profile == "openshift":
        # The Machine API re-applies a MachineSet's labels, so they cannot start there.
        assert not [
            label
            for label in node_labels(tmp_path, profile, devicePlugin={"migStrategy": "single"})
            if label.startswith(deploy_label)
        ]
    else:
        assert f"{deploy_label}=true" in node_labels(
            tmp_path, profile, devicePlugin={"migStrategy": "single"}
        )
    assert not schedulable(workload, {**gpu_node, deploy_label: "paused-for-mig-change"})


def node_labels(tmp_path: Path, profile: str, **sections: Any) -> list[str]:
    files = render(stack_for(tmp_path, profile, **sections)).node_files
    if profile == "kubeadm":
        join = load(files["join-configuration.yaml"])
        [arg] = [
            a for a in join["nodeRegistration"]["kubeletExtraArgs"] if a["name"] == "node-labels"
        ]
        return str(arg["value"]).split(",")
    if profile == "rke2":
        return list(load(files["rke2-agent-config.yaml"])["node-label"])
    patch = load(files["machineset-patch.yaml"])
    labels = patch["spec"]["template"]["spec"]["metadata"]["labels"]
    return [f"{key}={value}" for key, value in labels.items()]


@pytest.mark.parametrize("profile", MIG_PROFILES)
def test_gpu_nodes_register_with_the_default_mig_config(tmp_path, profile):
    labels = node_labels(
        tmp_path,
        profile,
        devicePlugin={"migStrategy": "single"},
        migManager={"defaultConfig": "all-1g.10gb"},
    )
    assert "nvidia.com/mig.config=all-1g.10gb" in labels
    # Upstream's default: MIG off until a node is labelled otherwise.
    assert "nvidia.com/mig.config=all-disabled" in node_labels(
        tmp_path, profile, devicePlugin={"migStrategy": "mixed"}
    )


def write(tmp_path: Path, body: str, mig_file: str | None = None) -> Path:
    if mig_file is not None:
        (tmp_path / "mig.yaml").write_text(textwrap.dedent(mig_file))
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\n" + textwrap.dedent(body)
    )
    return path


CUSTOM = """\
    version: v1
    mig-configs:
      inference:
      - devices: [0, 1]
        mig-enabled: true
        mig-devices: {"1g.10gb": 7}
      - devices: [2, 3]
        mig-enabled: false
"""


def test_user_mig_configs_join_the_built_in_ones(tmp_path, cli):
    path = write(
        tmp_path,
        """\
        devicePlugin: {migStrategy: mixed}
        migManager:
          defaultConfig: inference
          config: {file: mig.yaml}
        """,
        CUSTOM,
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "lab"
    config_map = load((folder / "configmap-nvidia-mig-manager-config.yaml").read_text())
    configs = load(config_map["data"]["config.yaml"])["mig-configs"]
    assert configs["inference"][0]["mig-devices"] == {"1g.10gb": 7}
    assert "all-balanced" in configs
    assert (
        "nvidia.com/mig.config=inference"
        in (folder / "node" / "join-configuration.yaml").read_text()
    )


@pytest.mark.parametrize(
    ("mig_file", "where", "words"),
    [
        (CUSTOM.replace('"1g.10gb"', '"1g.10gbx"'), ":6:", ["1g.10gbx", "not a MIG profile"]),
        (CUSTOM.replace("mig-enabled: true", "mig-enabled: yes please"), ":5:", ["mig-enabled"]),
        (CUSTOM.replace("version: v1", "version: v2"), ":1:", ["version"]),
        (CUSTOM.replace("devices: [2, 3]", "devices: some"), ":7:", ["devices", "'all'"]),
        (
            CUSTOM.replace(
                "        mig-enabled: false",
                "        mig-enabled: false\n        mig-devices: {1g.5gb: 1}",
            ),
            ":9:",
            ["mig-enabled is false"],
        ),
    ],
)
def test_a_bad_user_mig_config_names_its_line(tmp_path, cli, mig_file, where, words):
    path = write(
        tmp_path,
        """\
        devicePlugin: {migStrategy: single}
        migManager:
          config: {file: mig.yaml}
        """,
        mig_file,
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"mig.yaml{where}" in result.output
    for word in words:
        assert word in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            "devicePlugin: {migStrategy: single}\nmigManager: {defaultConfig: all-1g.10gbb}\n",
            "migManager.defaultConfig",
            ["all-1g.10gb"],
        ),
        (
            "migManager: {defaultConfig: all-1g.10gb}\n",
            "migManager.defaultConfig",
            ["not deployed"],
        ),
        (
            "devicePlugin: {migStrategy: single}\nmigManager: {config: {file: missing.yaml}}\n",
            "migManager.config.file",
            ["not found"],
        ),
    ],
)
def test_mig_manager_settings_are_checked(tmp_path, cli, body, field, words):
    result = cli("render", write(tmp_path, body), "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "cluster.yaml:" in result.output and field in result.output
    for word in words:
        assert word in result.output


def test_gke_partitions_gpus_itself(tmp_path, cli):
    path = tmp_path / "gke.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: gke-cos}\nmigManager: {enabled: true}\n"
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "gke.yaml:5:" in result.output and "migManager.enabled" in result.output


def test_openshift_mig_manager_may_use_the_privileged_scc(tmp_path):
    items = objects(tmp_path, "openshift", devicePlugin={"migStrategy": "single"})
    manager = find(items, "DaemonSet", "nvidia-mig-manager")
    binding = find(items, "RoleBinding", "nvidia-mig-manager")
    assert binding["subjects"][0]["name"] == pod_spec(manager)["serviceAccountName"]
    role = find(items, "Role", binding["roleRef"]["name"])
    assert {
        "apiGroups": ["security.openshift.io"],
        "resources": ["securitycontextconstraints"],
        "resourceNames": ["privileged"],
        "verbs": ["use"],
    } in role["rules"]


def test_mig_manager_may_label_its_node_and_find_the_pods_it_waits_for(tmp_path):
    items = objects(tmp_path, "kubeadm", devicePlugin={"migStrategy": "single"})
    manager = find(items, "DaemonSet", "nvidia-mig-manager")
    binding = find(items, "ClusterRoleBinding", "nvidia-mig-manager")
    assert binding["subjects"][0]["name"] == pod_spec(manager)["serviceAccountName"]
    role = find(items, "ClusterRole", binding["roleRef"]["name"])
    granted = {
        (resource, verb)
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {
        ("nodes", "get"),
        ("nodes", "list"),
        ("nodes", "watch"),
        ("nodes", "patch"),
        ("pods", "list"),
    } <= granted
    assert not any(verb in ("delete", "create", "*") for _, verb in granted)


def mounted_host_path(spec: dict[str, Any], container_path: str) -> str | None:
    """The host folder a container path of the MIG manager comes from."""
    [container] = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        if mount["mountPath"] == container_path:
            host_path: str = volumes[mount["name"]]["hostPath"]["path"]
            return host_path
    return None


@pytest.mark.parametrize(
    ("profile", "driver"),
    [
        ("kubeadm", {"mode": "container", "nodeOS": "ubuntu22.04"}),
        ("rke2", {"mode": "container", "nodeOS": "ubuntu22.04"}),
        ("openshift", {"mode": "driver-toolkit"}),
        ("kubeadm", {"mode": "preinstalled"}),
        # CDI without gpustack's toolkit: the host's toolkit package.
        ("kubeadm", {"mode": "preinstalled", "cdi": True}),
    ],
)
def test_mig_manager_finds_the_driver_and_refreshes_cdi_specs(tmp_path, profile, driver):
    # k8s-mig-manager v0.15.0 runs `chroot $DRIVER_ROOT_CTR_PATH nvidia-smi` after a MIG change
    # and, with CDI_ENABLED, rewrites the management CDI spec in /var/run/cdi
    # (pkg/mig/reconfigure/reconfigure.go); the operator mounts the driver root and the CDI root.
    driver = dict(driver)
    plugin: dict[str, Any] = {"migStrategy": "single"}
    if driver.pop("cdi", False):
        plugin["deviceListStrategy"] = "cdi-cri"
    sections: dict[str, Any] = {"devicePlugin": plugin, "driver": driver}
    if profile == "openshift":
        sections["driver"]["driverToolkitImage"] = "quay.io/openshift/driver-toolkit@sha256:" + (
            "0" * 64
        )
    stack = stack_for(tmp_path, profile, **sections)
    items = render(stack).objects
    spec = pod_spec(find(items, "DaemonSet", "nvidia-mig-manager"))
    [container] = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    driver_root = "/" if driver["mode"] == "preinstalled" else "/run/nvidia/driver"
    assert env["NVIDIA_DRIVER_ROOT"] == driver_root
    ctr_path = env["DRIVER_ROOT_CTR_PATH"]
    assert mounted_host_path(spec, ctr_path) == driver_root
    assert env["WITH_SHUTDOWN_HOST_GPU_CLIENTS"] == str(driver_root == "/").lower()
    if stack.uses_cdi:
        assert env["CDI_ENABLED"] == "true"
        assert mounted_host_path(spec, "/var/run/cdi") == "/var/run/cdi"
        # The spec it writes calls the same nvidia-cdi-hook as the device plugin's.
        plugin = find(items, "ConfigMap", "nvidia-device-plugin-config")
        flags = load(plugin["data"]["config.yaml"])["flags"]
        assert env["NVIDIA_CDI_HOOK_PATH"] == flags["plugin"]["nvidiaCTKPath"]
        assert env["NVIDIA_DEV_ROOT"] == flags["nvidiaDevRoot"]
    else:
        assert "CDI_ENABLED" not in env
