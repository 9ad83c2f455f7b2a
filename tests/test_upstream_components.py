"""NVIDIA's own components judge gpustack's output: each is built from the source archive of the
release gpustack renders (tests/upstream.py) and run on what a render writes.

- The device plugin's and GFD's config files, every one of every example and of variants that
  cover each sharing mode and MIG strategy, read by the components' own flags, environment and
  config code (their `loadConfig`, through our harness that prints the result), must give what
  the gpustack config asked for, field by field; a plugin config that the plugin would refuse is
  refused by gpustack first.
- Every MIG manager ConfigMap is read by `nvidia-mig-parted assert --valid-config`, once for each
  layout a node selects.
- `nvidia-ctk-installer`, run with the rendered toolkit DaemonSet's environment in a temporary host
  root holding the platform's own containerd config, writes the runtime handlers that the
  rendered RuntimeClasses name, with the CDI setting gpustack expects, and leaves the default
  runtime as the profile says.
- The driver manager's and the validator's code paths that need no GPU run against a fake
  `/run/nvidia`.

Everything here runs without a GPU; dev/node_check.py runs the rest on a GPU node.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import upstream
import yaml
from conftest import EXAMPLES, ROOT
from example_renders import example_configs, render_example

from gpustack import render
from gpustack.config import load_stack
from gpustack.model import NodePool
from gpustack.stack import Stack

pytestmark = pytest.mark.upstream

PLUGIN_CONFIG_MAP = "nvidia-device-plugin-config"


def objects_of(rendering: render.Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendering.objects if o.get("kind") == kind]


def daemonset(rendering: render.Rendering, name: str) -> dict[str, Any] | None:
    for found in objects_of(rendering, "DaemonSet"):
        if found["metadata"]["name"] == name:
            return found
    return None


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    for found in workload["spec"]["template"]["spec"]["containers"]:
        if found["name"] == name:
            return dict(found)
    raise AssertionError(f"{workload['metadata']['name']} has no container {name}")


def literal_env(found: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet sets it, less what comes from the API server
    (a pod's name, a node's name), which the config code does not read."""
    return {e["name"]: e["value"] for e in found.get("env", []) if "value" in e}


def run(
    command: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # A clean environment: only what the container would have, and a PATH for the tools.
    base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
    return subprocess.run(
        command, env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=120
    )


# --- The configs under test ----------------------------------------------------------------------
# Every example, and variants of two (a host driver and a driver container, whose plugin configs
# differ in their CDI settings) that cover what no example does: each sharing mode with and
# without renaming, and each MIG strategy, on the cluster and on node pools.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "mps": ("kubeadm.yaml", {"devicePlugin": {"sharing": {"strategy": "mps", "replicas": 3}}}),
    "mps-renamed": (
        "kubeadm-driver-container.yaml",
        {"devicePlugin": {"sharing": {"strategy": "mps", "replicas": 2, "renameByDefault": True}}},
    ),
    "time-slicing-renamed": (
        "kubeadm-driver-container.yaml",
        {
            "devicePlugin": {
                "sharing": {
                    "strategy": "time-slicing",
                    "replicas": 8,
                    "renameByDefault": True,
                    "failRequestsGreaterThanOne": False,
                }
            }
        },
    ),
    "mig-mixed": ("kubeadm.yaml", {"devicePlugin": {"migStrategy": "mixed", "sharing": None}}),
    "mig-single-time-slicing": (
        "kubeadm-driver-container.yaml",
        {"devicePlugin": {"migStrategy": "single", "sharing": {"strategy": "time-slicing"}}},
    ),
    "pools": (
        "kubeadm-driver-container.yaml",
        {
            "nodes": {
                "pools": [
                    {
                        "name": "mps",
                        "selector": {"example.com/pool": "mps"},
                        "devicePlugin": {"sharing": {"strategy": "mps", "replicas": 4}},
                    },
                    {
                        "name": "mixed",
                        "selector": {"example.com/pool": "mixed"},
                        "devicePlugin": {"migStrategy": "mixed"},
                    },
                ]
            }
        },
    ),
}


def _merge(base: Any, change: Any) -> Any:
    if isinstance(base, dict) and isinstance(change, dict):
        merged = dict(base)
        for key, value in change.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = _merge(base.get(key), value)
        return merged
    return copy.deepcopy(change)


def variant_config(name: str, folder: Path) -> Path:
    example, change = VARIANTS[name]
    document = yaml.safe_load((EXAMPLES / example).read_text())
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(_merge(document, change), sort_keys=False))
    return path


def configs_under_test(folder: Path) -> Iterator[tuple[str, Stack, render.Rendering]]:
    for path in example_configs():
        stack, rendering = render_example(path)
        yield path.stem, stack, rendering
    for name in VARIANTS:
        stack = load_stack(variant_config(name, folder))
        yield f"variant {name}", stack, render.render(stack)


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Stack, render.Rendering]]:
    return list(configs_under_test(tmp_path_factory.mktemp("variants")))


def plugin_configs(
    stack: Stack, rendering: render.Rendering
) -> list[tuple[str, NodePool | None, str]]:
    """The plugin's config files in the ConfigMap: (key, the pool whose nodes read it, text)."""
    found = [
        o for o in objects_of(rendering, "ConfigMap") if o["metadata"]["name"] == PLUGIN_CONFIG_MAP
    ]
    if not found:
        return []
    pools = {pool.name: pool for pool in stack.pools}
    return [(key, pools.get(key), text) for key, text in sorted(found[0]["data"].items())]


# --- The device plugin's and GFD's config --------------------------------------------------------


def read_by(
    harness: str, workload: dict[str, Any], container_name: str, text: str, folder: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`text` read by the component's own config code, with the environment and arguments of the
    rendered container (its CONFIG_FILE pointing at `text`)."""
    found = container(workload, container_name)
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "config.yaml"
    config_file.write_text(text)
    env = literal_env(found)
    assert env.get("CONFIG_FILE"), f"{container_name} reads no config file"
    env["CONFIG_FILE"] = str(config_file)
    binary = upstream.binaries("device-plugin") / harness
    result = run([str(binary), *found.get("args", [])], env)
    parsed = json.loads(result.stdout) if result.returncode == 0 else {}
    return result, parsed


def leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    else:
        yield path, value


def at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(document, dict) or key not in document:
            return KeyError
        document = document[key]
    return document


def normalized(path: tuple[str, ...], value: Any) -> Any:
    # The file may give one strategy as a string; the plugin holds a list (api/config/v1/flags.go
    # deviceListStrategyFlag.UnmarshalJSON).
    if path[-1:] == ("deviceListStrategy",) and isinstance(value, str):
        return [value]
    return value


def sharing_expected(stack: Stack, pool: NodePool | None) -> dict[str, Any]:
    sharing = stack.config.pool_sharing(pool)
    return {
        "strategy": sharing.strategy,
        "replicas": sharing.replicas,
        "rename": sharing.renameByDefault,
        "failRequestsGreaterThanOne": sharing.failRequestsGreaterThanOne
        if sharing.strategy == "time-slicing"
        # MPS refuses a request for more than one share unless told otherwise
        # (api/config/v1/config.go NewConfig, v0.20.0).
        else True,
    }


def assert_reads_as_asked(
    where: str, stack: Stack, pool: NodePool | None, text: str, parsed: dict[str, Any]
) -> None:
    config = parsed["config"]
    written = yaml.safe_load(text)
    # Every field gpustack writes is a field the component knows, read with the value written:
    # the file is read leniently (sigs.k8s.io/yaml), so a misspelt key would vanish silently.
    for path, value in leaves(written):
        got = at(config, path)
        if path[:2] == ("sharing", "timeSlicing") or path[:2] == ("sharing", "mps"):
            continue  # compared below, as the plugin holds them
        assert got == normalized(path, value), (
            f"{where}: {'.'.join(path)} {value!r} read as {got!r}"
        )
    flags = config["flags"]
    assert flags["migStrategy"] == stack.config.pool_mig_strategy(pool), where
    assert flags["nvidiaDriverRoot"] == stack.driver_root, where
    expected = sharing_expected(stack, pool)
    assert parsed["sharingStrategy"] == expected["strategy"], where
    if expected["strategy"] != "none":
        section = config["sharing"][
            "timeSlicing" if expected["strategy"] == "time-slicing" else "mps"
        ]
        assert section.get("renameByDefault", False) == expected["rename"], where
        assert section["failRequestsGreaterThanOne"] == expected["failRequestsGreaterThanOne"], (
            where
        )
        resources = section["resources"]
        assert [(r["name"], r["replicas"]) for r in resources] == [
            ("nvidia.com/gpu", expected["replicas"])
        ], where


def test_every_plugin_config_is_read_by_the_plugin_as_the_config_asked(
    renders: list[tuple[str, Stack, render.Rendering]], tmp_path: Path
) -> None:
    checked = set()
    for name, stack, rendering in renders:
        plugin = daemonset(rendering, "nvidia-device-plugin")
        for key, pool, text in plugin_configs(stack, rendering):
            assert plugin is not None, f"{name}: a plugin config and no plugin"
            where = f"{name} {PLUGIN_CONFIG_MAP}[{key}]"
            result, parsed = read_by(
                "plugin-config", plugin, "nvidia-device-plugin", text, tmp_path / name / key
            )
            assert result.returncode == 0, (
                f"{where}: the plugin refuses it: {result.stderr[-2000:]}"
            )
            assert_reads_as_asked(where, stack, pool, text, parsed)
            # MPS needs the MPS root, which only the DaemonSet's environment gives
            # (cmd/nvidia-device-plugin/main.go validateFlags).
            if parsed["sharingStrategy"] == "mps":
                assert parsed["config"]["flags"]["mpsRoot"], where
            checked.add((parsed["sharingStrategy"], parsed["config"]["flags"]["migStrategy"]))
    # Each sharing mode and each MIG strategy was read at least once.
    assert {s for s, _ in checked} == {"none", "time-slicing", "mps"}
    assert {m for _, m in checked} == {"none", "single", "mixed"}


def test_every_plugin_config_is_read_by_gfd_as_the_config_asked(
    renders: list[tuple[str, Stack, render.Rendering]], tmp_path: Path
) -> None:
    checked = 0
    for name, stack, rendering in renders:
        gfd = daemonset(rendering, "gpu-feature-discovery")
        configs = plugin_configs(stack, rendering)
        if gfd is None or not configs:
            continue
        for key, pool, text in configs:
            where = f"{name} gpu-feature-discovery with {PLUGIN_CONFIG_MAP}[{key}]"
            result, parsed = read_by(
                "gfd-config", gfd, "gpu-feature-discovery", text, tmp_path / name / key
            )
            assert result.returncode == 0, f"{where}: GFD refuses it: {result.stderr[-2000:]}"
            assert_reads_as_asked(where, stack, pool, text, parsed)
            # GFD publishes through the NodeFeature API exactly where the platform's NFD reads it.
            flags = parsed["config"]["flags"]
            assert flags["useNodeFeatureAPI"] == stack.facts.nodeFeatureAPI, where
            checked += 1
    assert checked


# A plugin config the plugin refuses, and the gpustack config that would ask for it: gpustack
# refuses the config before anything is written. (MPS with MIG strategy `single` reads cleanly
# but the plugin refuses it as it starts on MIG devices, internal/plugin/mps.go: "sharing using
# MPS is not supported for MIG devices"; tests/cases/bad/mps-with-mig.yaml holds that refusal.)
REFUSED: dict[str, tuple[str, dict[str, Any], str]] = {
    "mps with MIG mixed": (
        "kubeadm.yaml",
        {"devicePlugin": {"migStrategy": "mixed", "sharing": {"strategy": "mps"}}},
        "using --mig-strategy=mixed is not supported with MPS",
    ),
    "one replica": (
        "kubeadm.yaml",
        {"devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 1}}},
        "number of replicas must be >= 2",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_plugin_config_the_plugin_refuses_is_refused_by_gpustack_first(
    case: str, tmp_path: Path, cli: Any
) -> None:
    example, change, refusal = REFUSED[case]
    document = _merge(yaml.safe_load((EXAMPLES / example).read_text()), change)
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    result = cli("render", str(config), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    # The plugin file gpustack would have written, with the refused setting: the plugin refuses it.
    stack, rendering = render_example(EXAMPLES / example)
    plugin = daemonset(rendering, "nvidia-device-plugin")
    assert plugin is not None
    (_, _, text), *_ = plugin_configs(stack, rendering)
    written = yaml.safe_load(text)
    asked = document["devicePlugin"]
    written["flags"]["migStrategy"] = asked.get("migStrategy", "none")
    key = "mps" if asked["sharing"]["strategy"] == "mps" else "timeSlicing"
    written["sharing"] = {
        key: {
            "resources": [
                {"name": "nvidia.com/gpu", "replicas": asked["sharing"].get("replicas", 4)}
            ]
        }
    }
    result_upstream, _ = read_by(
        "plugin-config",
        plugin,
        "nvidia-device-plugin",
        yaml.safe_dump(written),
        tmp_path / "plugin",
    )
    assert result_upstream.returncode != 0
    assert refusal in result_upstream.stderr
