"""Names gpustack gives things itself cannot be taken by what a config names: a pool named like
the device plugin config of the nodes in no pool, a MIG layout named like the one gpustack gives
the pools that keep their GPUs whole, a pool's node file named like another file of the cluster.
(tests/cases/bad/ holds the messages: pools-named-default,
mig-config-file-turns-all-disabled-on.)"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import EXAMPLES

from gpustack.build.device_plugin_config import CONFIG_MAP, DEFAULT_CONFIG
from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack

CONFIG = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {{name: lab}}
platform: {{profile: rke2}}
nodes:
  pools:
  - name: {name}
    selector: {{example.com/gpu-pool: shared}}
    devicePlugin:
      sharing: {{strategy: time-slicing, replicas: 4}}
"""


def test_the_nodes_in_no_pool_keep_their_own_device_plugin_config(tmp_path: Path) -> None:
    # What a pool named `default` would have replaced: the config of every node outside it.
    config = tmp_path / "lab.yaml"
    config.write_text(CONFIG.format(name="shared"))
    objects = render(load_stack(config)).objects
    (config_map,) = [o for o in objects if o["metadata"]["name"] == CONFIG_MAP]
    assert sorted(config_map["data"]) == [DEFAULT_CONFIG, "shared"]
    assert "sharing" not in config_map["data"][DEFAULT_CONFIG]
    assert "timeSlicing" in config_map["data"]["shared"]


def test_a_pool_named_like_the_config_of_the_nodes_in_no_pool_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text(CONFIG.format(name=DEFAULT_CONFIG))
    with pytest.raises(UserError) as error:
        load_stack(config)
    assert error.value.field == "nodes.pools.0.name"
    assert (error.value.location.line, error.value.location.column) == (7, 11)
    assert error.value.message.startswith("pool name 'default' is reserved")


@pytest.mark.parametrize(
    ("entry", "refused"),
    [
        ("{devices: all, mig-enabled: true, mig-devices: {1g.10gb: 7}}", True),
        ("{devices: [0], mig-enabled: true, mig-devices: {7g.80gb: 1}}", True),
        # Turning MIG off on some GPUs only still keeps them whole: what the name promises.
        ("{devices: [0, 1], mig-enabled: false}", False),
    ],
)
def test_a_user_mig_layout_named_all_disabled_cannot_turn_mig_on(
    tmp_path: Path, entry: str, refused: bool
) -> None:
    (tmp_path / "mig.yaml").write_text(f"version: v1\nmig-configs:\n  all-disabled:\n  - {entry}\n")
    config = tmp_path / "lab.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: rke2}\ndevicePlugin: {migStrategy: single}\n"
        "migManager: {config: {file: mig.yaml}}\n"
    )
    if not refused:
        assert load_stack(config).mig_configs["all-disabled"][0]["devices"] == [0, 1]
        return
    with pytest.raises(UserError) as error:
        load_stack(config)
    assert error.value.field == "mig-configs.all-disabled[0].mig-enabled"
    assert "it cannot turn MIG on" in error.value.message


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.stem)
def test_no_pool_name_can_make_a_node_file_name_another_file_has(example: Path) -> None:
    # A pool's node files are the cluster's named `<stem>-<pool>.<suffix>` (node_files): one
    # could replace another file only if one file's stem and a dash began another's.
    stack = load_stack(example)
    nodes = stack.config.nodes.model_copy(update={"pools": []})
    alone = replace(stack, config=stack.config.model_copy(update={"nodes": nodes}))
    files = render(alone).node_files
    stems = [name.partition(".") for name in files]
    for stem, _, suffix in stems:
        for other, _, other_suffix in stems:
            assert not (suffix == other_suffix and other.startswith(f"{stem}-")), (stem, other)


def test_a_pool_annotation_names_the_configs_the_plugin_has() -> None:
    # multi-pool: the pools' configs are keys beside `default`, none of them `default`.
    objects = render(load_stack(EXAMPLES / "multi-pool.yaml")).objects
    (config_map,) = [o for o in objects if o["metadata"]["name"] == CONFIG_MAP]
    pools = json.loads(config_map["metadata"]["annotations"]["gpustack.dev/node-pools"])
    assert DEFAULT_CONFIG in config_map["data"]
    assert {pool["config"] for pool in pools} <= set(config_map["data"]) - {DEFAULT_CONFIG}
