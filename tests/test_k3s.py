"""k3s: the runtime k3s configures itself, the RuntimeClasses it ships, and its agent config.

Expectations are k3s' own facts, not gpustack's code:
- k3s looks for nvidia-container-runtime, nvidia-container-runtime.cdi and
  nvidia-container-runtime-experimental in $PATH with /usr/local/nvidia/toolkit (the GPU
  Operator's install dir) added, each time it starts, and renders the runtimes `nvidia`,
  `nvidia-cdi` and `nvidia-experimental` it found into the containerd config it generates at
  /var/lib/rancher/k3s/agent/etc/containerd/config.toml (k3s-io/k3s pkg/agent/containerd
  runtimes.go findNvidiaContainerRuntimes, config_linux.go runtimesPath; pkg/agent/templates
  ExtraRuntimes; k3s-io/docs docs/advanced.md "Alternative Container Runtime Support");
- containerd's default runtime stays runc unless `default-runtime` is set (k3s #8700), and k3s
  ships the RuntimeClasses of those runtimes (docs/advanced.md; manifests/runtimes.yaml);
- its embedded containerd listens on /run/k3s/containerd/containerd.sock; when containerd exits,
  k3s exits with it and systemd starts k3s again (pkg/agent/containerd/containerd.go Run;
  k3s.service: Restart=always, KillMode=process);
- the agent reads /etc/rancher/k3s/config.yaml with `node-taint`, `node-label` and
  `default-runtime`; the kubelet runs inside k3s, with no unit of its own;
- k3s refuses to start while `default-runtime` names a runtime it did not find at start
  (pkg/agent/containerd/config_linux.go SetupContainerdConfig: "default runtime %s was not
  found"); RKE2 runs the same agent code.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from manifests import env, host_path
from ruamel.yaml import YAML

from gpustack.build.pipeline import Rendering, render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack

K3S_RUNTIMES = ["nvidia", "nvidia-cdi", "nvidia-experimental"]
K3S_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
K3S_CONTAINERD_DIR = "/var/lib/rancher/k3s/agent/etc/containerd"
K3S_SOCKET = "/run/k3s/containerd/containerd.sock"
CONTAINER = "driver: {mode: container}\n"


def rendered(tmp_path: Path, body: str = "") -> Rendering:
    path = tmp_path / "k3s.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: k3s}\n" + textwrap.dedent(body)
    )
    return render(load_stack(path))


def pod_specs(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in rendering.objects
        if o["kind"] == "DaemonSet"
    }


def agent_config(rendering: Rendering) -> dict[str, Any]:
    config: dict[str, Any] = YAML(typ="safe").load(rendering.node_files["k3s-agent-config.yaml"])
    return config


@pytest.mark.parametrize("body", ["", CONTAINER])
def test_gpu_pods_name_the_runtime_class_k3s_ships_and_gpustack_renders_none(tmp_path, body):
    rendering = rendered(tmp_path, body)
    # runc stays containerd's default: every pod that needs the GPUs names k3s' `nvidia` class.
    specs = pod_specs(rendering)
    for name in ("nvidia-device-plugin", "nvidia-dcgm-exporter", "gpu-feature-discovery"):
        assert specs[name]["runtimeClassName"] == "nvidia", name
    assert not [o for o in rendering.objects if o["kind"] == "RuntimeClass"]
    assert "default-runtime" not in agent_config(rendering)


def test_a_class_k3s_does_not_ship_is_rendered(tmp_path):
    rendering = rendered(tmp_path, "runtimeClass: {name: nvidia-gpu}\n")
    [runtime_class] = [o for o in rendering.objects if o["kind"] == "RuntimeClass"]
    assert (runtime_class["metadata"]["name"], runtime_class["handler"]) == ("nvidia-gpu", "nvidia")


@pytest.mark.parametrize("handler", K3S_RUNTIMES)
def test_every_handler_k3s_adds_is_taken(tmp_path, handler):
    (main,) = pod_specs(rendered(tmp_path, CONTAINER + f"runtimeClass: {{handler: {handler}}}\n"))[
        "nvidia-container-toolkit-daemonset"
    ]["containers"]
    assert env(main)["CONTAINERD_RUNTIME_CLASS"] == handler


def test_a_handler_k3s_never_adds_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"runtimeClass\.handler") as error:
        rendered(tmp_path, "runtimeClass: {handler: nvidia-gpu}\n")
    assert ", ".join(K3S_RUNTIMES) in str(error.value)


def test_toolkit_installs_the_runtime_where_k3s_finds_it_and_restarts_k3s(tmp_path):
    rendering = rendered(tmp_path, CONTAINER)
    spec = pod_specs(rendering)["nvidia-container-toolkit-daemonset"]
    (main,) = spec["containers"]
    variables = env(main)
    assert host_path(spec, variables["ROOT"] + "/toolkit") == K3S_TOOLKIT_DIR
    # SIGHUP to k3s' containerd: k3s exits with it and systemd starts it again, finding the runtime.
    assert host_path(spec, variables["CONTAINERD_SOCKET"]) == K3S_SOCKET
    assert variables["RUNTIME_RESTART_MODE"] == "signal"
    assert spec["hostPID"] is True
    # Nothing k3s generates or renders its config from is written: no config, no template.
    for name in ("CONTAINERD_CONFIG", "RUNTIME_DROP_IN_CONFIG"):
        written = host_path(spec, variables[name])
        assert written is not None and not written.startswith(K3S_CONTAINERD_DIR), name
    assert sorted(rendering.node_files) == ["README.md", "k3s-agent-config.yaml"]


def test_agent_config_carries_taints_labels_and_the_default_runtime(tmp_path):
    body = textwrap.dedent(
        """\
        nodes:
          selector: {gpu.example.com/site: edge}
          taints:
          - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
        runtimeClass: {enabled: false}
        """
    )
    rendering = rendered(tmp_path, body)
    config = agent_config(rendering)
    assert config["node-taint"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert "gpu.example.com/site=edge" in config["node-label"]
    # Without a RuntimeClass on GPU pods, k3s' own --default-runtime makes nvidia the default.
    assert config["default-runtime"] == "nvidia"
    assert not [name for name, spec in pod_specs(rendering).items() if "runtimeClassName" in spec]


def test_node_readme_names_k3s_units_and_files(tmp_path):
    readme = rendered(tmp_path, CONTAINER).node_files["README.md"]
    assert "/etc/rancher/k3s/config.yaml" in readme
    assert "`k3s-agent` (`k3s` on a server node)" in readme
    assert f"grep nvidia {K3S_CONTAINERD_DIR}/config.toml" in readme
    assert "rke2" not in readme.lower()
    host = rendered(tmp_path).node_files["README.md"]
    assert "restart `k3s-agent` once after" in host


def test_mig_manager_leaves_the_kubelet_running(tmp_path):
    # The kubelet runs inside k3s: there is no kubelet.service to stop.
    spec = pod_specs(rendered(tmp_path, "devicePlugin: {migStrategy: single}\n"))[
        "nvidia-mig-manager"
    ]
    (main,) = spec["containers"]
    assert env(main)["HOST_KUBELET_SYSTEMD_SERVICE"] == ""


def test_profiles_list_shows_k3s_and_aks(cli):
    listed = {line.split()[0]: line for line in cli("profiles", "list").stdout.splitlines()}
    assert "embedded containerd (default runtime runc)" in listed["k3s"]
    assert "nvidia as default runtime" in listed["aks"]


@pytest.mark.parametrize("profile", ["k3s", "rke2"])
def test_no_default_runtime_the_toolkit_daemonset_installs_only_after_the_node_starts(
    tmp_path, cli, profile
):
    # The agent would refuse to start with `default-runtime: nvidia` before the toolkit's pod
    # has installed the runtime, and the pod needs a started agent: the node would never join.
    path = tmp_path / "k3s.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        f"platform: {{profile: {profile}}}\n"
        "driver: {mode: container, nodeOS: ubuntu24.04}\n"
        "runtimeClass: {enabled: false}\n"
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "k3s.yaml:6:" in result.output and "runtimeClass.enabled" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
