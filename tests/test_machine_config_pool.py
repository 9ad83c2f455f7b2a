"""OpenShift's GPU-only MachineConfigPool: gpustack's MachineConfigs reach the GPU nodes and no
other worker, the GPU nodes keep every worker MachineConfig, new GPU machines join the pool, and
`nodes.machineConfigPool: worker` targets the worker pool, every worker.

Pools are matched as the Machine Config Operator matches them: a MachineConfig belongs to each
pool whose machineConfigSelector selects its labels, a node to the pool whose nodeSelector
selects its labels (a custom pool wins over worker: openshift/machine-config-operator
docs/custom-pools.md). The worker pool is the operator's own (its selector: role worker).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, SHARED, read_manifest, stack_for

from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
ROLE = "machineconfiguration.openshift.io/role"
# The worker pool every OpenShift cluster has (machine-config-operator
# manifests/worker.machineconfigpool.yaml).
WORKER_POOL = {
    "machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
    "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for requirement in selector.get("matchExpressions", []):
        key, operator = requirement["key"], requirement["operator"]
        values = requirement.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def rendering(tmp_path: Path, extra: str = "") -> Any:
    (tmp_path / "entitlement.pem").write_bytes(PEM)
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: openshift}\n"
        "entitlement: {enabled: true, pemFile: entitlement.pem}\n" + extra
    )
    return render(load_stack(config))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def gpu_node_labels(result: Any) -> dict[str, str]:
    """A node a patched GPU MachineSet creates: the worker role every worker machine has, and
    the labels the patch's template gives it."""
    patch = yaml.safe_load(result.node_files["machineset-patch.yaml"])
    labels = patch["spec"]["template"]["spec"].get("metadata", {}).get("labels", {})
    return {"node-role.kubernetes.io/worker": "", **labels}


def test_gpu_machine_configs_reach_gpu_nodes_only(tmp_path: Path) -> None:
    result = rendering(tmp_path)
    [pool] = of_kind(result.objects, "MachineConfigPool")
    configs = of_kind(result.objects, "MachineConfig")
    assert len(configs) == 3
    cpu_node = {"node-role.kubernetes.io/worker": ""}
    gpu_node = gpu_node_labels(result)
    # The GPU node is in the GPU pool; a CPU worker is not.
    assert selects(pool["spec"]["nodeSelector"], gpu_node)
    assert not selects(pool["spec"]["nodeSelector"], cpu_node)
    assert selects(WORKER_POOL["nodeSelector"], cpu_node)
    for config in configs:
        labels = config["metadata"]["labels"]
        # In the GPU pool, not in the worker pool: applying them reboots no CPU worker.
        assert selects(pool["spec"]["machineConfigSelector"], labels)
        assert not selects(WORKER_POOL["machineConfigSelector"], labels)
    # The GPU pool inherits every worker MachineConfig (kubelet, CRI-O, the cluster's own).
    assert selects(pool["spec"]["machineConfigSelector"], {ROLE: "worker"})
    assert not selects(pool["spec"]["machineConfigSelector"], {ROLE: "master"})


def test_applied_before_the_machine_configs_that_target_it(tmp_path: Path) -> None:
    kustomization = yaml.safe_load((ROOT / "out/openshift-entitled/kustomization.yaml").read_text())
    resources = kustomization["resources"]
    pool = resources.index("machineconfigpool-worker-gpu.yaml")
    assert all(
        pool < resources.index(name) for name in resources if name.startswith("machineconfig-")
    )
    committed = read_manifest(
        (ROOT / "out/openshift-entitled/machineconfigpool-worker-gpu.yaml").read_text()
    )
    assert committed["metadata"]["name"] == "worker-gpu"


def test_worker_keeps_every_worker_as_before(tmp_path: Path) -> None:
    result = rendering(tmp_path, "nodes: {machineConfigPool: worker}\n")
    assert of_kind(result.objects, "MachineConfigPool") == []
    for config in of_kind(result.objects, "MachineConfig"):
        assert selects(WORKER_POOL["machineConfigSelector"], config["metadata"]["labels"])
    assert "node-role.kubernetes.io/worker-gpu" not in gpu_node_labels(result)
    assert "drain and reboot the workers" in result.node_files["README.md"]


def test_the_node_readme_says_how_to_move_existing_nodes(tmp_path: Path) -> None:
    readme = rendering(tmp_path).node_files["README.md"]
    assert "oc label node NODE node-role.kubernetes.io/worker-gpu=" in readme


def test_only_openshift_has_machine_config_pools(tmp_path: Path, cli) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\nnfd: {mode: deploy}\ndevicePlugin: {enabled: true}\n"
        "nodes:\n  machineConfigPool: worker-gpu\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:8:22" in result.output and "nodes.machineConfigPool" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(UserError):
        stack_for(tmp_path, "rke2", nodes={"machineConfigPool": "worker"})
    # The default means nothing off OpenShift and is no error there.
    assert stack_for(tmp_path, "kubeadm", nfd={"mode": "deploy"}).gpu_machine_config_pool is None


@pytest.mark.shared
def test_pool_and_patch_pass_the_upstream_schemas(tmp_path: Path) -> None:
    import jsonschema

    schemas = SHARED / "crd-schemas"
    result = rendering(tmp_path)
    [pool] = of_kind(result.objects, "MachineConfigPool")
    jsonschema.validate(
        pool,
        json.loads(
            (schemas / "machineconfiguration.openshift.io/machineconfigpool_v1.json").read_text()
        ),
    )
    patch = yaml.safe_load(result.node_files["machineset-patch.yaml"])
    machine_set = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {"name": "gpu", "namespace": "openshift-machine-api"},
        **patch,
    }
    jsonschema.validate(
        machine_set,
        json.loads((schemas / "machine.openshift.io/machineset_v1beta1.json").read_text()),
    )
