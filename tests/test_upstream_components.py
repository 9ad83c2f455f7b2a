"""NVIDIA's own components judge gpustack's output: each is built from the source archive of the
release gpustack renders (tests/upstream.py) and run on what a render writes.

- The device plugin's and GFD's config files, every one of every example and of variants that
  cover each sharing mode and MIG strategy, read by the components' own flags, environment and
  config code (their `loadConfig`, through our harness that prints the result), must give what
  the gpustack config asked for, field by field; a plugin config that the plugin would refuse is
  refused by gpustack first.
- Every MIG manager ConfigMap is read by `nvidia-mig-parted assert --valid-config`, once for each
  layout a node selects; a user's MIG config that mig-parted refuses, gpustack refuses first.
- `nvidia-ctk-installer`, run with the rendered toolkit DaemonSet's environment in a temporary host
  root holding the platform's own runtime config (containerd 1.7 and 2.x, k3s, RKE2, CRI-O),
  writes the runtime handlers that the rendered RuntimeClasses name, with the CDI setting gpustack
  expects, and leaves the default runtime as the profile says.
- The validator's host-driver check, against a fake host and `/run/nvidia/validations`, writes
  the ready file with gpustack's driver root; the driver manager reads the rendered command and
  environment.

Everything here runs without a GPU; dev/node_check.py runs the rest on a GPU node.
"""

from __future__ import annotations

import copy
import glob
import json
import re
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import upstream
import yaml
from conftest import EXAMPLES
from example_renders import example_configs, render_example

from gpustack.build import pipeline
from gpustack.config.node_pools import NodePool
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack

pytestmark = pytest.mark.upstream

PLUGIN_CONFIG_MAP = "nvidia-device-plugin-config"


def objects_of(rendering: pipeline.Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendering.objects if o.get("kind") == kind]


def daemonset(rendering: pipeline.Rendering, name: str) -> dict[str, Any] | None:
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
    # A session of its own: a signal a component sends to its process group stays there.
    return subprocess.run(
        command,
        env={**base, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
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
    # RKE2 with a driver container: the one way the toolkit DaemonSet runs against RKE2's
    # containerd template (rke2.yaml itself has the driver and toolkit on the host).
    "rke2-driver-container": (
        "rke2.yaml",
        {"driver": {"mode": "container", "nodeOS": "ubuntu22.04"}},
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


def configs_under_test(folder: Path) -> Iterator[tuple[str, Stack, pipeline.Rendering]]:
    for path in example_configs():
        stack, rendering = render_example(path)
        ASKED[id(stack)] = Asked(yaml.safe_load(path.read_text()), stack)
        yield path.stem, stack, rendering
    for name in VARIANTS:
        config = variant_config(name, folder)
        stack = load_stack(config)
        ASKED[id(stack)] = Asked(yaml.safe_load(config.read_text()), stack)
        yield f"variant {name}", stack, pipeline.render(stack)


# --- What each config asked for ------------------------------------------------------------------
# The expected values come from the config file as written (and the profile's data where the file
# says `auto`), read here on their own, never from gpustack's resolved Stack: a test that compared
# the output with gpustack's own reading of the config would pass whatever that reading got wrong.
# Where the file leaves a field out, its documented default (docs/config.md) applies.
# Where a driver container's root filesystem appears on the host (NVIDIA/gpu-operator
# controllers/object_controls.go DefaultDriverInstallDir, v26.7.0).
DRIVER_CONTAINER_ROOT = "/run/nvidia/driver"
SHARING_DEFAULTS = {
    "strategy": "none",
    "replicas": 4,
    "renameByDefault": False,
    "failRequestsGreaterThanOne": True,
}


class Asked:
    """The settings a config file asks for, read from the file itself."""

    def __init__(self, document: dict[str, Any], stack: Stack) -> None:
        self.document = document
        self.profile = stack.profile

    def own(self, pool: str, *path: str) -> Any:
        """The value at `path` in a pool's own settings (None: unset)."""
        for entry in self.document.get("nodes", {}).get("pools", []):
            if entry["name"] == pool:
                found = at(entry, path)
                return None if found is KeyError else found
        raise AssertionError(f"no pool {pool}")

    def section(self, *path: str, pool: str | None = None) -> Any:
        """The value at `path` in the pool's own settings, else in the cluster's (None: unset)."""
        if pool is not None and self.own(pool, *path) is not None:
            return self.own(pool, *path)
        found = at(self.document, path)
        return None if found is KeyError else found

    @property
    def driver_root(self) -> str:
        mode = self.section("driver", "mode") or "auto"
        if mode == "auto":
            mode = self.profile.facts.driver.default
        if mode in ("container", "driver-toolkit"):
            return DRIVER_CONTAINER_ROOT
        return self.profile.facts.driver.root

    def mig_strategy(self, pool: str | None) -> str:
        return str(self.section("devicePlugin", "migStrategy", pool=pool) or "none")

    def sharing(self, pool: str | None) -> dict[str, Any]:
        return {**SHARING_DEFAULTS, **(self.section("devicePlugin", "sharing", pool=pool) or {})}

    def mig_layout(self, pool: str | None) -> str:
        own = self.own(pool, "migManager", "defaultConfig") if pool else None
        if own:
            return str(own)
        # docs/config.md: a pool whose plugin uses no MIG in a MIG cluster keeps whole GPUs.
        if self.mig_strategy(pool) == "none" and self.mig_strategy(None) != "none":
            return "all-disabled"
        return str(self.section("migManager", "defaultConfig") or "all-disabled")

    def device_list_strategy(self, rendering: pipeline.Rendering) -> list[str]:
        """`auto`: CDI through annotations and the CRI field where the toolkit is deployed, as
        the GPU Operator sets DEVICE_LIST_STRATEGY (controllers/object_controls.go, v26.7.0)."""
        strategy = self.section("devicePlugin", "deviceListStrategy") or "auto"
        if strategy != "auto":
            return [strategy]
        toolkit = daemonset(rendering, "nvidia-container-toolkit-daemonset")
        return ["cdi-annotations", "cdi-cri"] if toolkit else ["envvar"]

    @property
    def dra(self) -> bool:
        pools = self.document.get("nodes", {}).get("pools", [])
        allocations = {self.document.get("gpuAllocation")} | {p.get("gpuAllocation") for p in pools}
        return "dra" in allocations

    def uses_cdi(self, rendering: pipeline.Rendering) -> bool:
        cdi = any(s.startswith("cdi") for s in self.device_list_strategy(rendering))
        return cdi or self.dra

    @property
    def runtime_handler(self) -> str:
        return str(self.section("runtimeClass", "handler") or "nvidia")


ASKED: dict[int, Asked] = {}


def asked(stack: Stack) -> Asked:
    return ASKED[id(stack)]


@pytest.fixture(scope="module")
def renders(
    tmp_path_factory: pytest.TempPathFactory,
) -> list[tuple[str, Stack, pipeline.Rendering]]:
    return list(configs_under_test(tmp_path_factory.mktemp("variants")))


def plugin_configs(
    stack: Stack, rendering: pipeline.Rendering
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
    sharing = asked(stack).sharing(pool.name if pool else None)
    return {
        "strategy": sharing["strategy"],
        "replicas": sharing["replicas"],
        "rename": sharing["renameByDefault"],
        "failRequestsGreaterThanOne": sharing["failRequestsGreaterThanOne"]
        if sharing["strategy"] == "time-slicing"
        # MPS refuses a request for more than one share unless told otherwise
        # (api/config/v1/config.go NewConfig, v0.20.0).
        else True,
    }


def assert_reads_as_asked(
    where: str,
    stack: Stack,
    rendering: pipeline.Rendering,
    pool: NodePool | None,
    text: str,
    parsed: dict[str, Any],
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
    wanted = asked(stack)
    pool_name = pool.name if pool else None
    assert flags["migStrategy"] == wanted.mig_strategy(pool_name), where
    assert flags["nvidiaDriverRoot"] == wanted.driver_root, where
    assert flags["plugin"]["deviceListStrategy"] == wanted.device_list_strategy(rendering), where
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
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
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
            assert_reads_as_asked(where, stack, rendering, pool, text, parsed)
            # MPS needs the MPS root, which only the DaemonSet's environment gives
            # (cmd/nvidia-device-plugin/main.go validateFlags).
            if parsed["sharingStrategy"] == "mps":
                assert parsed["config"]["flags"]["mpsRoot"], where
            checked.add((parsed["sharingStrategy"], parsed["config"]["flags"]["migStrategy"]))
    # Each sharing mode and each MIG strategy was read at least once.
    assert {s for s, _ in checked} == {"none", "time-slicing", "mps"}
    assert {m for _, m in checked} == {"none", "single", "mixed"}


def test_every_plugin_config_is_read_by_gfd_as_the_config_asked(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
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
            assert_reads_as_asked(where, stack, rendering, pool, text, parsed)
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


# --- The MIG manager's layouts -------------------------------------------------------------------
MIG_CONFIG_MAP = "nvidia-mig-manager-config"
# The label a node's MIG manager applies the layout of (`nvidia.com/mig.config=NAME`).
MIG_LABEL = re.compile(r"nvidia\.com/mig\.config=([A-Za-z0-9._+-]+)")


def mig_parted_valid(text: str, layout: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """`nvidia-mig-parted assert --valid-config`: the file parsed by mig-parted's own reader
    (api/spec/v1) and the layout selected from it, as the MIG manager does before it applies it
    (cmd/nvidia-mig-parted/assert/assert.go); no GPU is touched."""
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "config.yaml"
    config_file.write_text(text)
    binary = upstream.binaries("mig-parted") / "nvidia-mig-parted"
    command = [str(binary), "assert", "--valid-config", "-f", str(config_file), "-c", layout]
    return run(command, {})


def test_every_mig_manager_config_is_read_by_mig_parted_with_each_layout_nodes_select(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
) -> None:
    checked = 0
    for name, stack, rendering in renders:
        found = [
            o for o in objects_of(rendering, "ConfigMap") if o["metadata"]["name"] == MIG_CONFIG_MAP
        ]
        if not found:
            continue
        manager = daemonset(rendering, "nvidia-mig-manager")
        assert manager is not None, name
        # The manager reads the key its CONFIG_FILE names from the ConfigMap's mount.
        config_file = literal_env(container(manager, "nvidia-mig-manager"))["CONFIG_FILE"]
        (text,) = [v for k, v in found[0]["data"].items() if config_file.endswith(f"/{k}")]
        wanted = asked(stack)
        layouts = {wanted.mig_layout(pool.name if pool else None) for pool in [None, *stack.pools]}
        # The layouts the node files register GPU nodes with are the ones the config asked for.
        selected = {
            found
            for path, text in rendering.node_files.items()
            if not path.endswith(".md")
            for found in MIG_LABEL.findall(text)
        }
        assert selected == layouts, (
            f"{name}: nodes select {sorted(selected)}, not {sorted(layouts)}"
        )
        for layout in sorted(layouts):
            result = mig_parted_valid(text, layout, tmp_path / name / layout)
            where = f"{name} {MIG_CONFIG_MAP} layout {layout}"
            assert result.returncode == 0, f"{where}: {result.stderr[-2000:]}"
            assert "Selected MIG configuration is valid" in result.stdout, where
            checked += 1
        # A name the file lacks is refused: the check above can fail.
        missing = mig_parted_valid(text, "no-such-layout", tmp_path / name / "missing")
        assert missing.returncode != 0 and "not present" in missing.stderr, name
    assert checked


# --- The container toolkit's installer -----------------------------------------------------------
# The platforms' own containerd configs (tests/data/upstream/runtimes/README.md says where each
# comes from): on kubeadm the installer edits the node's config; k3s and RKE2 generate theirs at
# every start and add the nvidia runtimes they find, so the installer must leave theirs alone.
CONTAINERD = Path(__file__).parent / "data" / "upstream" / "runtimes"
CONTAINERD_CONFIGS = {
    "kubeadm": ("containerd-1.7.toml", "containerd-2.x.toml"),
    "k3s": ("k3s.toml",),
    "rke2": ("rke2.toml",),
}
TOOLKIT_CONTAINER = "nvidia-container-toolkit-ctr"
# What k3s (and RKE2, which shares its agent) adds to its containerd config for each nvidia
# handler: the first of these binaries it finds in /usr/local/nvidia/toolkit or /usr/bin
# (k3s-io/k3s pkg/agent/containerd/runtimes.go).
K3S_NVIDIA_HANDLERS = {
    "nvidia": ("nvidia-container-runtime",),
    "nvidia-cdi": ("nvidia-container-runtime.cdi", "nvidia-container-runtime"),
    "nvidia-experimental": ("nvidia-container-runtime-experimental", "nvidia-container-runtime"),
}
# The toolkit image's artifacts the installer copies to the host (the image's /artifacts/deb,
# nvidia-ctk-installer toolkit/installer: executables.go, libraries.go, v1.20.0). The two Go
# tools are the ones built here; the others are files the installer copies and wraps.
ARTIFACT_EXECUTABLES = (
    "nvidia-container-cli",
    "nvidia-container-runtime-hook",
    "nvidia-container-runtime",
    "nvidia-container-runtime.cdi",
    "nvidia-container-runtime.legacy",
)
ARTIFACT_LIBRARIES = ("libnvidia-container.so.1", "libnvidia-container-go.so.1")


def host_mounts(workload: dict[str, Any], found: dict[str, Any]) -> list[tuple[str, str]]:
    """(container path, host path) of each hostPath volume the container mounts, deepest first."""
    volumes = {
        v["name"]: v["hostPath"]["path"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    }
    mounts = [
        (m["mountPath"].rstrip("/") or "/", volumes[m["name"]])
        for m in found.get("volumeMounts", [])
        if m["name"] in volumes
    ]
    return sorted(mounts, key=lambda mount: -len(mount[0]))


def in_host(host: Path, mounts: list[tuple[str, str]], value: str) -> str:
    """A path as the container sees it, made a path in the temporary host root, as the kubelet's
    mounts make it; any other value as it is."""
    for inside, outside in mounts:
        if value == inside or value.startswith(inside.rstrip("/") + "/"):
            return str(host) + outside.rstrip("/") + value[len(inside.rstrip("/")) :]
    return value


def artifacts(folder: Path) -> Path:
    root = folder / "artifacts" / "deb"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    built = upstream.binaries("toolkit")
    for name in ("nvidia-ctk", "nvidia-cdi-hook"):
        source = built / ("nvidia-ctk" if name == "nvidia-cdi-hook" else name)
        (root / "usr" / "bin" / name).write_bytes(source.read_bytes())
        (root / "usr" / "bin" / name).chmod(0o755)
    for name in ARTIFACT_EXECUTABLES:
        (root / "usr" / "bin" / name).write_text("#!/bin/sh\nexit 0\n")
        (root / "usr" / "bin" / name).chmod(0o755)
    for name in ARTIFACT_LIBRARIES:
        (root / "usr" / "lib" / "x86_64-linux-gnu" / name).write_bytes(b"\x7fELF")
    return root


# A stand-in for containerd's socket: it answers a connection (as containerd's gRPC server
# does, with its first frame) and writes each SIGHUP it gets to a file: the installer finds the
# socket's owner from its peer credentials and signals it (containerd_linux.go SignalContainerd).
SOCKET_OWNER = """
import os, select, signal, socket, sys
path, record = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGHUP, lambda *_: open(record, "a").write("SIGHUP\\n"))
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
open(record, "a").write("listening\\n")
while True:
    try:
        connection, _ = server.accept()
    except InterruptedError:
        continue
    # The installer asks for the peer's credentials (SO_PASSCRED) once connected; a byte sent
    # before that carries none, and it would signal process 0, its own process group.
    select.select([connection], [], [], 0.5)
    connection.sendall(b"\\x00")
"""


def platform_config_path(stack: Stack) -> str:
    """The runtime's own config on the node: containerd's, or the file the toolkit edits."""
    runtime = stack.facts.runtime
    path = runtime.containerdConfig or runtime.toolkit.configFile
    assert path, stack.profile.metadata.name
    return path


def short_host(tmp_path: Path, case: str) -> Path:
    """A host root whose socket paths fit a Unix socket's 108 bytes: a short folder under
    /tmp, linked from the test's own folder so that pytest keeps it with the test's files."""

    place = Path(tempfile.mkdtemp(prefix="gpustack-"))
    (tmp_path / case).symlink_to(place)
    (place / "host").mkdir()
    return place / "host"


def toolkit_run(
    stack: Stack, rendering: pipeline.Rendering, fixture: str, host: Path
) -> tuple[subprocess.CompletedProcess[str], str]:
    """The installer with the rendered container's environment, in `host` holding the platform's
    containerd config: its log, and what the socket's owner received."""
    workload = daemonset(rendering, "nvidia-container-toolkit-daemonset")
    assert workload is not None
    found = container(workload, TOOLKIT_CONTAINER)
    mounts = host_mounts(workload, found)
    platform_config = host / platform_config_path(stack).lstrip("/")
    platform_config.parent.mkdir(parents=True, exist_ok=True)
    platform_config.write_bytes((CONTAINERD / fixture).read_bytes())
    for _, outside in mounts:
        (host / outside.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    env = {name: in_host(host, mounts, value) for name, value in literal_env(found).items()}
    for name in ("RUNTIME_CONFIG", "RUNTIME_DROP_IN_CONFIG", "TOOLKIT_PID_FILE"):
        Path(env[name]).parent.mkdir(parents=True, exist_ok=True)
    # What the image brings: its artifacts (the image's /artifacts/deb).
    env["TOOLKIT_SOURCE_ROOT"] = str(artifacts(host.parent))
    record = host.parent / "signals"
    owner = None
    if "RUNTIME_SOCKET" in env:
        socket_path = Path(env["RUNTIME_SOCKET"])
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        owner = subprocess.Popen(["python3", "-c", SOCKET_OWNER, str(socket_path), str(record)])
    try:
        for _ in range(200):
            if owner is None or record.exists():
                break
            subprocess.run(["sleep", "0.05"])
        # The installer runs as the DaemonSet runs it, as a daemon that configures the runtime
        # and waits for a signal; NO_DAEMON only stops it after the configuration. --ignore-errors
        # lets it past what needs the driver, which this machine lacks: the device nodes and the
        # CDI spec for management containers (dev/node_check.py runs it without, on a GPU node).
        env["NO_DAEMON"] = "true"
        command = [
            str(upstream.binaries("toolkit") / "nvidia-ctk-installer"),
            *found.get("args", []),
        ]
        if not Path("/proc/driver/nvidia").exists():
            command.append("--ignore-errors")
        result = run(command, env)
        # The signal is delivered before the installer exits; its handler runs soon after.
        for _ in range(100):
            if "Successfully signaled" not in result.stderr or "SIGHUP" in record.read_text():
                break
            subprocess.run(["sleep", "0.05"])
    finally:
        if owner is not None:
            owner.kill()
            owner.wait()
    return result, record.read_text() if record.exists() else ""


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def effective_containerd(host: Path, config: Path) -> dict[str, Any]:
    """containerd's config as containerd reads it: the file, then each file its `imports` name,
    merged over it table by table (containerd's services/server/config LoadConfig)."""
    document = tomllib.loads(config.read_text())
    for pattern in document.get("imports", []):
        for name in sorted(glob.glob(str(host) + pattern)):
            document = deep_merge(document, tomllib.loads(Path(name).read_text()))
    return document


def cri_runtime(document: dict[str, Any]) -> dict[str, Any]:
    """The CRI runtime plugin's table: its name from config version 3 on (containerd 2; 2.3
    writes version 4), or version 2's (containerd 1.7)."""
    plugins = document["plugins"]
    if document["version"] >= 3:
        return dict(plugins["io.containerd.cri.v1.runtime"])
    return dict(plugins["io.containerd.grpc.v1.cri"])


def rendered_handlers(rendering: pipeline.Rendering) -> set[str]:
    return {o["handler"] for o in objects_of(rendering, "RuntimeClass")}


def pod_runtime_classes(rendering: pipeline.Rendering) -> set[str]:
    names = set()
    for o in rendering.objects:
        if o.get("kind") in {"DaemonSet", "Deployment", "Job"}:
            name = o["spec"]["template"]["spec"].get("runtimeClassName")
            if name:
                names.add(name)
    return names


def toolkit_cases(
    renders: list[tuple[str, Stack, pipeline.Rendering]],
) -> Iterator[tuple[str, Stack, pipeline.Rendering, str]]:
    for name, stack, rendering in renders:
        if daemonset(rendering, "nvidia-container-toolkit-daemonset") is None:
            continue
        if stack.facts.runtime.engine != "containerd":
            continue
        for fixture in CONTAINERD_CONFIGS[stack.profile.metadata.name]:
            yield name, stack, rendering, fixture


def test_the_toolkit_installer_gives_containerd_the_runtimes_gpustack_renders(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
) -> None:
    checked = set()
    for name, stack, rendering, fixture in toolkit_cases(renders):
        if stack.facts.runtime.toolkit.configFile != stack.facts.runtime.containerdConfig:
            continue  # k3s and RKE2: the next test
        where = f"{name} on {fixture}"
        host = short_host(tmp_path, f"{name}-{fixture}")
        result, signals = toolkit_run(stack, rendering, fixture, host)
        assert result.returncode == 0, f"{where}: {result.stderr[-3000:]}"
        # Only what needs the driver failed (this machine has none).
        for line in result.stderr.splitlines():
            if "level=error" in line:
                assert "device nodes" in line or "CDI spec" in line, f"{where}: {line}"
        document = effective_containerd(
            host, host / stack.facts.runtime.containerdConfig.lstrip("/")
        )
        runtime = cri_runtime(document)
        runtimes = runtime["containerd"]["runtimes"]
        # Each handler the rendered RuntimeClasses name is a runtime of containerd's, whose
        # binary the installer put on the host.
        # The runtime the config names is containerd's, and so is each rendered RuntimeClass's
        # handler.
        wanted = asked(stack)
        assert wanted.runtime_handler in runtimes, f"{where}: {sorted(runtimes)}"
        handlers = rendered_handlers(rendering)
        assert handlers <= set(runtimes), f"{where}: {sorted(handlers)} not in {sorted(runtimes)}"
        for handler in handlers:
            binary = runtimes[handler]["options"]["BinaryName"]
            assert binary.startswith(str(host)), where
            assert Path(binary).is_file(), where
            checked.add(fixture)
        # The default runtime: runc where GPU pods name a RuntimeClass, the nvidia runtime where
        # they do not (the profile's runtimeClass).
        default = runtime["containerd"]["default_runtime_name"]
        if stack.runtime_class_name:
            assert default == "runc", where
            assert stack.runtime_class_name in {
                o["metadata"]["name"] for o in objects_of(rendering, "RuntimeClass")
            }
        else:
            assert default == stack.config.runtimeClass.handler, where
        # CDI: where the plugin hands GPUs out as CDI devices through the CRI field, containerd
        # itself must resolve them; the nvidia runtime resolves the annotations in its cdi mode.
        if "cdi-cri" in wanted.device_list_strategy(rendering) or wanted.dra:
            assert runtime["enable_cdi"] is True, f"{where}: containerd's CDI is off"
        toolkit_config = (
            host / "usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml"
        )
        runtime_config = tomllib.loads(toolkit_config.read_text())["nvidia-container-runtime"]
        assert runtime_config["mode"] == ("cdi" if wanted.uses_cdi(rendering) else "auto"), where
        # The nvidia runtime resolves the CDI devices the plugin names in the annotations it
        # writes: the plugin's prefix (as the plugin reads its config) is one the runtime reads.
        plugin = daemonset(rendering, "nvidia-device-plugin")
        if plugin is not None and "cdi-annotations" in wanted.device_list_strategy(rendering):
            (_, _, text), *_ = plugin_configs(stack, rendering)
            _, parsed = read_by(
                "plugin-config", plugin, "nvidia-device-plugin", text, host.parent / "plugin"
            )
            prefix = parsed["config"]["flags"]["plugin"]["cdiAnnotationPrefix"]
            assert prefix in runtime_config["modes"]["cdi"]["annotation-prefixes"], where
        # containerd was told to load its new config.
        expected = "SIGHUP" if stack.facts.runtime.toolkit.restartMode == "signal" else ""
        assert (expected in signals) if expected else "SIGHUP" not in signals, where
    assert {"containerd-1.7.toml", "containerd-2.x.toml"} <= checked


def test_on_k3s_and_rke2_the_installer_leaves_their_config_and_installs_what_they_look_for(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
) -> None:
    checked = set()
    for name, stack, rendering, fixture in toolkit_cases(renders):
        if stack.facts.runtime.toolkit.configFile == stack.facts.runtime.containerdConfig:
            continue
        where = f"{name} on {fixture}"
        host = short_host(tmp_path, f"{name}-{fixture}")
        result, signals = toolkit_run(stack, rendering, fixture, host)
        assert result.returncode == 0, f"{where}: {result.stderr[-3000:]}"
        platform_config = host / platform_config_path(stack).lstrip("/")
        assert platform_config.read_bytes() == (CONTAINERD / fixture).read_bytes(), where
        # The handlers the platform adds after its restart: those whose binary it finds.
        found = {
            handler
            for handler, candidates in K3S_NVIDIA_HANDLERS.items()
            if any((host / "usr/local/nvidia/toolkit" / c).is_file() for c in candidates)
        }
        assert set(stack.facts.runtime.providedHandlers) <= found, where
        for runtime_class in pod_runtime_classes(rendering):
            # The platform's own RuntimeClasses name their handler alike.
            assert runtime_class in found, f"{where}: pods ask for {runtime_class}"
        assert "SIGHUP" in signals, f"{where}: the platform was not restarted to find them"
        checked.add(stack.profile.metadata.name)
    assert checked == {"k3s", "rke2"}


# --- The validator and the driver manager --------------------------------------------------------
# The validator's driver check, run as the rendered init container runs it, in a private mount
# namespace whose root holds what its container would: this machine's system folders (for the
# validator's own `chroot` and `sh`), a fake host at /host whose nvidia-smi and modprobe succeed
# (our fake-tool), /run/nvidia/validations and /host-dev-char. With a driver on the host, it
# writes the ready file that gpustack's waiting init containers look for (ready_files.py), with
# the driver root gpustack renders. The container-driver path asks the API server whether a GPU
# Operator manages the driver (cmd/nvidia-validator/main.go isDriverManagedByOperator): it needs a
# cluster, and runs in dev/node_check.py's record instead.
CONTAINER_ROOT = """
set -e
mount --make-rprivate /
root="$ROOT"
for folder in usr bin sbin lib lib64 etc; do
    if [ -L "/$folder" ]; then ln -s "$(readlink "/$folder")" "$root/$folder"
    elif [ -d "/$folder" ]; then mkdir -p "$root/$folder"; mount --rbind "/$folder" "$root/$folder"; fi
done
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/host" "$root/host-dev-char" \
    "$root/run/nvidia/validations" "$root/validator"
mount --rbind /proc "$root/proc"; mount --rbind /sys "$root/sys"; mount --rbind /dev "$root/dev"
mount --rbind "$FAKE_HOST" "$root/host"
mount --bind "$VALIDATIONS" "$root/run/nvidia/validations"
cp "$VALIDATOR" "$root/validator/nvidia-validator"
exec chroot "$root" /validator/nvidia-validator
"""


def fake_host(folder: Path) -> Path:
    host = folder / "fake-host"
    tool = upstream.binaries("gpu-operator") / "fake-tool"
    for place in ("usr/bin/nvidia-smi", "sbin/modprobe"):
        (host / place).parent.mkdir(parents=True, exist_ok=True)
        (host / place).write_bytes(tool.read_bytes())
        (host / place).chmod(0o755)
    return host


def test_the_validator_writes_the_ready_file_gpustack_waits_for_on_a_host_driver(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
) -> None:
    checked = 0
    for name, stack, rendering in renders:
        validator = daemonset(rendering, "nvidia-operator-validator")
        if validator is None or stack.driver_mode != "preinstalled":
            continue
        init = [
            c
            for c in validator["spec"]["template"]["spec"].get("initContainers", [])
            if literal_env(c).get("COMPONENT") == "driver"
        ]
        assert init, name
        # The validator looks for a host driver at /host (cmd/nvidia-validator/main.go): the
        # host's driver root, as the config asked, is what the pod mounts there.
        wanted = asked(stack)
        assert ("/host", wanted.driver_root) in host_mounts(validator, init[0]), name
        folder = tmp_path / name
        validations = folder / "validations"
        validations.mkdir(parents=True)
        root = folder / "root"
        root.mkdir()
        env = literal_env(init[0])
        env.pop("WITH_WAIT", None)  # one attempt: the fake driver is there
        # The /dev/char links are made from the GPUs' device nodes, which a machine without a
        # GPU lacks: the one step left out here.
        env["DISABLE_DEV_CHAR_SYMLINK_CREATION"] = "true"
        env.update(
            ROOT=str(root),
            FAKE_HOST=str(fake_host(folder)),
            VALIDATIONS=str(validations),
            VALIDATOR=str(upstream.binaries("gpu-operator") / "nvidia-validator"),
        )
        result = run(["unshare", "-m", "sh", "-c", CONTAINER_ROOT], env)
        where = f"{name}: {result.stdout[-1500:]} {result.stderr[-1500:]}"
        assert result.returncode == 0, where
        assert "Detected a pre-installed driver on the host" in result.stderr, where
        # The validator's driverStatusFile (cmd/nvidia-validator/main.go), which the MIG manager's
        # entrypoint sources and the validator's later steps wait for.
        ready = validations / "driver-ready"
        assert ready.is_file(), where
        status = dict(line.split("=", 1) for line in ready.read_text().splitlines())
        assert status["IS_HOST_DRIVER"] == "true", where
        assert status["NVIDIA_DRIVER_ROOT"] == wanted.driver_root, where
        checked += 1
    assert checked


def test_the_driver_manager_accepts_the_rendered_command_and_environment(
    renders: list[tuple[str, Stack, pipeline.Rendering]],
) -> None:
    """The driver manager reads its command and every environment variable the rendered
    container sets (a value it cannot parse stops it with `Incorrect Usage`), and then needs
    the API server, which is where it stops here: the point after its settings are read."""
    checked = 0
    binary = upstream.binaries("driver-manager") / "driver-manager"
    for name, _, rendering in renders:
        for workload in objects_of(rendering, "DaemonSet"):
            spec = workload["spec"]["template"]["spec"]
            for found in [*spec.get("initContainers", []), *spec["containers"]]:
                if found.get("command") != ["driver-manager"]:
                    continue
                env = {**literal_env(found), "NODE_NAME": "gpu-node"}
                result = run([str(binary), *found.get("args", [])], env)
                where = f"{name} {workload['metadata']['name']}/{found['name']}: {result.stderr[-1500:]}"
                assert "Incorrect Usage" not in result.stderr + result.stdout, where
                assert "failed to create kube client" in result.stderr, where
                checked += 1
    assert checked


def test_on_cri_o_the_installer_writes_the_runtime_handlers_gpustack_renders(
    renders: list[tuple[str, Stack, pipeline.Rendering]], tmp_path: Path
) -> None:
    """OpenShift: CRI-O's drop-in names the handlers of the rendered RuntimeClasses. The installer
    then restarts CRI-O through the host's systemd (`chroot /host systemctl restart crio`, its
    default restart mode for CRI-O): the one step that fails here, after the drop-in is written."""
    checked = 0
    for name, stack, rendering in renders:
        workload = daemonset(rendering, "nvidia-container-toolkit-daemonset")
        if workload is None or stack.facts.runtime.engine != "cri-o":
            continue
        host = short_host(tmp_path, name)
        result, _ = toolkit_run(stack, rendering, "cri-o.conf", host)
        restart = "unable to restart crio: error restarting crio using systemd"
        assert result.returncode == 0 or restart in result.stderr, result.stderr[-3000:]
        drop_in = host / stack.facts.runtime.toolkit.dropInConfigFile.lstrip("/")
        runtimes = tomllib.loads(drop_in.read_text())["crio"]["runtime"]["runtimes"]
        assert asked(stack).runtime_handler in runtimes, f"{name}: {sorted(runtimes)}"
        handlers = rendered_handlers(rendering)
        assert handlers and handlers <= set(runtimes), f"{name}: {sorted(runtimes)}"
        for handler in handlers:
            assert Path(runtimes[handler]["runtime_path"]).is_file(), name
        # The nvidia runtime stays an extra handler: CRI-O's default is left alone.
        assert "default_runtime" not in tomllib.loads(drop_in.read_text())["crio"]["runtime"]
        checked += 1
    assert checked


# MIG configs a user brings (`migManager.config.file`), each entry of `custom` as written: what
# mig-parted refuses (api/spec/v1 spec.go, its own reader), gpustack refuses first, at the file's
# line; what mig-parted reads, gpustack reads too, except where it is stricter, for the reason
# given.
MIG_ENTRIES = {
    "a profile with media extensions": '- {devices: all, mig-enabled: true, mig-devices: {"1g.10gb+me": 1}}',
    "a compute-instance profile": '- {devices: all, mig-enabled: true, mig-devices: {"1c.2g.20gb": 2}}',
    "no GPUs listed": "- {devices: [], mig-enabled: true, mig-devices: {}}",
    "a GPU listed twice": "- {devices: [0, 0], mig-enabled: false}",
    "a device filter": '- {device-filter: "0x233010DE", devices: all, mig-enabled: false}',
    "device filters": '- {device-filter: ["0x233010DE", "0x20B010DE"], devices: all, mig-enabled: false}',
    "a negative count": '- {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": -1}}',
    "only zero counts": '- {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 0}}',
    "a count as a string": '- {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": "2"}}',
    "an upper-case profile": '- {devices: all, mig-enabled: true, mig-devices: {"1G.10GB": 1}}',
    "no mig-enabled": "- {devices: all}",
    "no devices": "- {mig-enabled: false}",
    "devices as a string": '- {devices: "0", mig-enabled: false}',
    "an unknown field": "- {devices: all, mig-enabled: false, foo: bar}",
    "mig-enabled as a string": '- {devices: all, mig-enabled: "yes please"}',
    "devices while MIG is off": '- {devices: all, mig-enabled: false, mig-devices: {"1g.5gb": 1}}',
    "no entries": "[]",
    "a negative GPU index": "- {devices: [-1], mig-enabled: false}",
}
# mig-parted reads these; gpustack refuses them, on purpose.
MIG_STRICTER = {
    # A GPU index is never negative: mig-parted's filter would match no GPU, silently.
    "a negative GPU index",
}


@pytest.mark.parametrize("entry", sorted(MIG_ENTRIES))
def test_a_mig_config_mig_parted_refuses_is_refused_by_gpustack_first(
    entry: str, tmp_path: Path, cli: Any
) -> None:
    body = MIG_ENTRIES[entry]
    lines = body if body == "[]" else "\n    " + body
    mig_file = tmp_path / "mig.yaml"
    mig_file.write_text(f"version: v1\nmig-configs:\n  custom: {lines}\n".replace(": \n", ":\n"))
    upstream_result = mig_parted_valid(mig_file.read_text(), "custom", tmp_path / "mig-parted")
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\ndevicePlugin: {migStrategy: mixed}\n"
        "migManager:\n  defaultConfig: custom\n  config: {file: mig.yaml}\n"
    )
    result = cli("render", str(config), "-o", str(tmp_path / "out"))
    assert "Traceback" not in result.output
    if entry in MIG_STRICTER:
        assert upstream_result.returncode == 0, "mig-parted refuses it too: not stricter"
        assert result.exit_code == 2, result.output
        assert "mig.yaml:" in result.output
    elif upstream_result.returncode != 0:
        assert "Error parsing config file" in upstream_result.stderr
        assert result.exit_code == 2, result.output
        assert "mig.yaml:" in result.output
        assert not (tmp_path / "out").exists()
    else:
        assert result.exit_code == 0, result.output
