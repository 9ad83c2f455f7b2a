"""NVIDIA's device plugin and its MPS control daemon, checked against what the binaries expect.

Facts are NVIDIA/k8s-device-plugin v0.20.0's: the MPS daemon works in `/mps` inside its container
(cmd/mps-control-daemon/mps/root.go `ContainerRoot`, `/mps/.ready` in main.go) and the plugin
health-checks the daemon there, while MPS_ROOT is the host path it mounts into GPU pods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import stack_for, validate_upstream
from ruamel.yaml import YAML

from gpustack.build.pipeline import render

PLUGIN = "nvidia-device-plugin"
MPS_DAEMON = "nvidia-device-plugin-mps-control-daemon"
HOST_MPS_ROOT = "/run/nvidia/mps"


def objects(tmp_path: Path, profile: str, **sections: Any) -> list[dict[str, Any]]:
    return render(stack_for(tmp_path, profile, **sections)).objects


def find(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (match,) = [o for o in items if o["kind"] == "DaemonSet" and o["metadata"]["name"] == name]
    return match


def host_mounts(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Container mount path -> host path, for the container's hostPath mounts."""
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    return {m["mountPath"]: host[m["name"]] for m in container["volumeMounts"] if m["name"] in host}


def mps_objects(tmp_path: Path) -> list[dict[str, Any]]:
    return objects(tmp_path, "kubeadm", devicePlugin={"sharing": {"strategy": "mps"}})


def test_plugin_and_mps_daemon_meet_in_the_folder_both_binaries_use(tmp_path):
    rendered = mps_objects(tmp_path)
    for name in (PLUGIN, MPS_DAEMON):
        pod = find(rendered, name)["spec"]["template"]["spec"]
        mounts = host_mounts(pod, pod["containers"][0])
        assert mounts["/mps"] == HOST_MPS_ROOT, name
        assert mounts["/dev/shm"] == f"{HOST_MPS_ROOT}/shm", name
    plugin = find(rendered, PLUGIN)["spec"]["template"]["spec"]["containers"][0]
    # The plugin mounts the host's pipe folder into GPU pods: it needs the host path.
    assert {"name": "MPS_ROOT", "value": HOST_MPS_ROOT} in plugin["env"]


def test_mps_daemon_shares_a_tmpfs_shm_with_the_host(tmp_path):
    pod = find(mps_objects(tmp_path), MPS_DAEMON)["spec"]["template"]["spec"]
    # After the validator's toolkit-ready wait, which every GPU DaemonSet starts with.
    wait, init = pod["initContainers"]
    assert wait["name"] == "toolkit-validation"
    assert init["command"] == ["mps-control-daemon", "mount-shm"]
    (mount,) = init["volumeMounts"]
    # mount-shm mounts a tmpfs at /mps/shm; only a Bidirectional (so privileged) mount of the
    # host's MPS root carries it back to the host, where the daemon's /dev/shm and clients see it.
    assert mount["mountPath"] == "/mps" and mount["mountPropagation"] == "Bidirectional"
    assert host_mounts(pod, init) == {"/mps": HOST_MPS_ROOT}
    assert init["securityContext"] == {"privileged": True}
    validate_upstream(find(mps_objects(tmp_path), MPS_DAEMON))


@pytest.mark.parametrize("profile", ["openshift", "kubeadm", "rke2"])
def test_plugin_may_reach_the_kubelet_socket_under_selinux(tmp_path, profile):
    """RHCOS enforces SELinux, and container_t may not bind or connect in device-plugins/: the
    plugin gets spc_t there (admitted by SCC privileged), and stays unprivileged everywhere."""
    plugin = find(objects(tmp_path, profile), PLUGIN)["spec"]["template"]["spec"]["containers"][0]
    security = plugin["securityContext"]
    assert not security.get("privileged")
    assert security["capabilities"] == {"drop": ["ALL"]}
    expected = {"type": "spc_t"} if profile == "openshift" else None
    assert security.get("seLinuxOptions") == expected


def plugin_config(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The plugin's config file as the plugin reads it."""
    (config_map,) = [
        o
        for o in items
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "nvidia-device-plugin-config"
    ]
    return YAML(typ="safe").load(config_map["data"]["config.yaml"])


@pytest.mark.parametrize("profile", ["kubeadm", "rke2", "openshift"])
def test_plugin_leaves_devices_to_the_nvidia_runtime_elsewhere(tmp_path, profile):
    rendered = objects(tmp_path, profile)
    assert plugin_config(rendered)["flags"]["plugin"]["passDeviceSpecs"] is False


@pytest.mark.parametrize("profile", ["kubeadm", "rke2", "openshift"])
def test_plugin_account_grants_nothing_beyond_the_scc(tmp_path, profile):
    """The plugin and the MPS daemon never call the API server (the upstream static manifest
    gives them no RBAC): no token, no ClusterRole, and on OpenShift only `use` of SCC privileged."""
    rendered = objects(tmp_path, profile, devicePlugin={"sharing": {"strategy": "mps"}})
    (account,) = [
        o for o in rendered if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == PLUGIN
    ]
    assert account["automountServiceAccountToken"] is False
    bound = [
        o
        for o in rendered
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["name"] == PLUGIN for s in o["subjects"])
    ]
    roles = {(o["kind"], o["metadata"]["name"]): o for o in rendered}
    rules = [
        rule
        for binding in bound
        for rule in roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]["rules"]
    ]
    expected = (
        [
            {
                "apiGroups": ["security.openshift.io"],
                "resources": ["securitycontextconstraints"],
                "resourceNames": ["privileged"],
                "verbs": ["use"],
            }
        ]
        if profile == "openshift"
        else []
    )
    assert rules == expected
    assert all(binding["kind"] == "RoleBinding" for binding in bound)
