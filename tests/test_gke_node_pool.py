"""GKE's GPU node pool artifacts (node/gke-node-pool.sh, node/containernodepool.yaml): a machine
that takes the GPUs, and every sharing and MIG setting GKE's device plugin needs, or a refusal."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import CRD_SCHEMAS, write_config
from ruamel.yaml import YAML

from gpustack.build.pipeline import render
from gpustack.resolve.load import load_stack

GKE = ["gke-cos", "gke-ubuntu"]


def write(tmp_path: Path, profile: str, body: str) -> Path:
    return write_config(tmp_path, profile, body, file="pool.yaml")


def pool(tmp_path: Path, profile: str, body: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The gcloud --accelerator settings (plus --machine-type) and the ContainerNodePool."""
    files = render(load_stack(write(tmp_path, profile, body))).node_files
    words = shlex.split(files["gke-node-pool.sh"].replace("\\\n", " "), comments=True)
    flags = dict(word[2:].split("=", 1) for word in words if word.startswith("--"))
    settings = dict(item.split("=", 1) for item in flags["accelerator"].split(","))
    settings["machine-type"] = flags["machine-type"]
    return settings, YAML(typ="safe").load(files["containernodepool.yaml"])


def schema_valid(node_pool: dict[str, Any]) -> None:
    schema = CRD_SCHEMAS / "container.cnrm.cloud.google.com" / "containernodepool_v1beta1.json"
    if schema.is_file():  # the upstream CRD schema, where the references are
        jsonschema.validate(node_pool, json.loads(schema.read_text()))


A100 = """\
nodes:
  gke:
    machineType: a2-highgpu-2g
    accelerator: {type: nvidia-tesla-a100, count: 2%s}
"""


@pytest.mark.parametrize("profile", GKE)
def test_the_pool_names_a_machine_that_takes_its_gpus(tmp_path, profile):
    flags, node_pool = pool(tmp_path, profile, A100 % "")
    assert flags["machine-type"] == "a2-highgpu-2g"
    assert (flags["type"], flags["count"]) == ("nvidia-tesla-a100", "2")
    config = node_pool["spec"]["nodeConfig"]
    assert config["machineType"] == "a2-highgpu-2g"
    [accelerator] = config["guestAccelerator"]
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-tesla-a100", 2)
    schema_valid(node_pool)


@pytest.mark.parametrize("profile", GKE)
def test_the_default_pool_is_a_gpu_machine(tmp_path, profile):
    flags, node_pool = pool(tmp_path, profile, "")
    assert flags["machine-type"].startswith("g2-") and flags["type"] == "nvidia-l4"
    schema_valid(node_pool)


@pytest.mark.parametrize(
    ("strategy", "gcloud", "api"),
    [
        ("time-slicing", "time-sharing", "TIME_SHARING"),
        ("mps", "mps", "MPS"),
    ],
)
def test_sharing_becomes_the_pools_sharing(tmp_path, strategy, gcloud, api):
    body = f"devicePlugin: {{sharing: {{strategy: {strategy}, replicas: 3}}}}\n"
    flags, node_pool = pool(tmp_path, "gke-cos", body)
    assert flags["gpu-sharing-strategy"] == gcloud
    assert flags["max-shared-clients-per-gpu"] == "3"
    [accelerator] = node_pool["spec"]["nodeConfig"]["guestAccelerator"]
    assert accelerator["gpuSharingConfig"] == {
        "gpuSharingStrategy": api,
        "maxSharedClientsPerGpu": 3,
    }
    schema_valid(node_pool)


def test_mig_becomes_the_pools_partition_size(tmp_path):
    body = A100 % ", gpuPartitionSize: 2g.10gb" + "devicePlugin: {migStrategy: single}\n"
    flags, node_pool = pool(tmp_path, "gke-ubuntu", body)
    assert flags["gpu-partition-size"] == "2g.10gb"
    [accelerator] = node_pool["spec"]["nodeConfig"]["guestAccelerator"]
    assert accelerator["gpuPartitionSize"] == "2g.10gb"
    schema_valid(node_pool)


@pytest.mark.parametrize(
    ("body", "where", "field", "words"),
    [
        (
            "nodes:\n  gke:\n    machineType: g2-standard-8\n    accelerator: {type: nvidia-tesla-a100, count: 1}\n",
            ":7:18:",
            "nodes.gke.machineType",
            ["a2-highgpu", "g2-standard-8"],
        ),
        (
            "nodes:\n  gke:\n    machineType: n1-standard-8\n    accelerator: {type: nvidia-h100-80gb, count: 1}\n",
            ":7:18:",
            "nodes.gke.machineType",
            ["a3-highgpu"],
        ),
        (
            "nodes:\n  gke:\n    machineType: a2-highgpu-2g\n    accelerator: {type: nvidia-tesla-a100, count: 1}\n",
            ":8:51:",
            "nodes.gke.accelerator.count",
            ["2"],
        ),
        (
            "nodes:\n  gke:\n    machineType: g2-standard-8\n    accelerator: {type: nvidia-l44, count: 1}\n",
            ":8:25:",
            "nodes.gke.accelerator.type",
            ["nvidia-l4"],
        ),
        (
            "nodes:\n  gke:\n    machineType: g2-standard-8\n    accelerator: {type: nvidia-l4, count: 1, gpuPartitionSize: 1g.5gb}\n",
            ":8:",
            "nodes.gke.accelerator.gpuPartitionSize",
            ["nvidia-l4"],
        ),
        (
            "devicePlugin: {migStrategy: single}\n",
            ":5:",
            "devicePlugin.migStrategy",
            ["gpuPartitionSize"],
        ),
        (
            A100 % ", gpuPartitionSize: 1g.5gb" + "devicePlugin: {migStrategy: mixed}\n",
            ":9:",
            "devicePlugin.migStrategy",
            ["single"],
        ),
        (
            "devicePlugin: {sharing: {strategy: time-slicing, renameByDefault: true}}\n",
            ":5:",
            "devicePlugin.sharing.renameByDefault",
            ["nvidia.com/gpu"],
        ),
    ],
)
def test_what_a_gke_pool_cannot_be_is_refused(tmp_path, cli, body, where, field, words):
    result = cli("render", write(tmp_path, "gke-cos", body), "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"pool.yaml{where}" in result.output and field in result.output, result.output
    for word in words:
        assert word in result.output
    assert not (tmp_path / "out").exists()


def test_gke_pool_settings_outside_gke_are_refused(tmp_path, cli):
    body = "nodes:\n  gke: {machineType: g2-standard-8, accelerator: {type: nvidia-l4, count: 1}}\n"
    result = cli("render", write(tmp_path, "kubeadm", body), "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "pool.yaml:6:" in result.output and "nodes.gke" in result.output
