#!/usr/bin/env python3
"""Check a rendered cluster's node side on a real GPU node, with NVIDIA's own binaries.

Run on a GPU host (as root: the device plugin's socket folder, the kubelet's, is under
/var/lib/kubelet) with the binaries of the releases gpustack renders, built by
`python tests/upstream.py device-plugin toolkit gpu-operator` (each component's land in its own
folder of ~/.cache/gpustack-upstream/bin/: copy the six that BINARIES names into one folder on
the node), and one or more rendered cluster folders:

    python3 node_check.py --bin BIN_DIR --report report.json out/kubeadm-lab out/multi-pool ...

Needs Python 3.9+ and PyYAML. It needs no kubelet, no container runtime and no network, and
changes no GPU setting (MIG mode, compute mode, clocks, persistence): it reads the GPUs and runs
what a node's pods would run, each against temporary folders (what it leaves on the host is listed
in docs/node-check.md):

- GFD `--oneshot` with each rendered device plugin config (every pool's) and GFD's rendered
  environment: the labels must include every `nvidia.com/` label a rendered workload selects
  on that GFD publishes, the MIG strategy and the sharing the config asks for;
- the device plugin with each config and its rendered environment, against a stand-in for the
  kubelet's device-plugin service (registration and ListAndWatch, then one Allocate): the
  resources and counts it advertises must be what the config means (GPUs times replicas,
  renamed resources);
- the NFD rule's PCI match against the node's PCI devices;
- the validator's driver check (`nvidia-validator`, COMPONENT=driver), in a private mount
  namespace where /host is this host;
- `nvidia-ctk-installer` with the rendered toolkit environment in a temporary host root (the
  management CDI spec it generates from the real driver), and `nvidia-ctk cdi list` on the
  device plugin's CDI specs: the names the plugin hands out must be names CDI resolves;
- the CUDA check the validator and the smoke test run (the vectorAdd sample): a vector
  addition compiled from PTX by the driver and run on each GPU through the CUDA driver API.

Each check prints one line (PASS, FAIL or SKIP with why); the report holds the details. Exit 0
when nothing failed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

PLUGIN_CONFIG_MAP = "nvidia-device-plugin-config"
MPS_CAPABLE = "nvidia.com/mps.capable"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The device plugin serves its sockets in the kubelet's device-plugin folder, which it does not
# take as a setting (k8s.io/kubelet deviceplugin/v1beta1 DevicePluginPath).
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
# Labels under nvidia.com/ that GFD does not publish: the deploy labels a GPU Operator or
# gpustack's node files set, the config labels a user sets (gpustack lint node_labels).
NOT_FROM_GFD = re.compile(
    r"^nvidia\.com/(gpu\.deploy\.|gpu\.present$|device-plugin\.config$|mig\.config)"
)


# The binaries --bin must hold (tests/upstream.py builds them; docs/node-check.md says which
# component's folder each comes from).
BINARIES = (
    "gpu-feature-discovery",
    "nvidia-device-plugin",
    "kubelet-stub",
    "nvidia-ctk",
    "nvidia-ctk-installer",
    "nvidia-validator",
)


class Report:
    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []

    def add(self, name: str, status: str, why: str = "", **details: Any) -> None:
        self.checks.append({"check": name, "status": status, "why": why, **details})
        print(f"{status:4} {name}{': ' + why if why else ''}", flush=True)

    @property
    def failed(self) -> bool:
        return any(c["status"] == "FAIL" for c in self.checks)


def run(
    command: list[str], env: dict[str, str] | None = None, timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": "/root"}
    return subprocess.run(
        command,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
        **kw,
    )


# --- The rendered cluster ------------------------------------------------------------------------


def load_objects(folder: Path) -> list[dict[str, Any]]:
    objects = []
    for path in sorted(folder.rglob("*.yaml")):
        if "node" in path.relative_to(folder).parts[:1]:
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and "kind" in document:
                objects.append(document)
    return objects


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    for o in objects:
        if o.get("kind") == kind and o.get("metadata", {}).get("name") == name:
            return o
    return None


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    for c in workload["spec"]["template"]["spec"]["containers"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


def literal_env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def selected_labels(objects: list[dict[str, Any]]) -> dict[str, set[str]]:
    """The nvidia.com/ labels rendered workloads select on (nodeSelector, required affinity with
    In), with the values they accept, less those GFD does not publish."""
    wanted: dict[str, set[str]] = {}
    for o in objects:
        template = o.get("spec", {}).get("template", {}).get("spec")
        if not isinstance(template, dict):
            continue
        for key, value in (template.get("nodeSelector") or {}).items():
            wanted.setdefault(key, set()).add(str(value))
        affinity = template.get("affinity", {}).get("nodeAffinity", {})
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
        for term in required.get("nodeSelectorTerms", []):
            for expression in term.get("matchExpressions", []):
                if expression.get("operator") == "In":
                    wanted.setdefault(expression["key"], set()).update(expression["values"])
    return {
        k: v for k, v in wanted.items() if k.startswith("nvidia.com/") and not NOT_FROM_GFD.match(k)
    }


# --- The node ------------------------------------------------------------------------------------


def gpus() -> list[dict[str, str]]:
    fields = "index,name,uuid,driver_version,mig.mode.current,memory.total"
    result = run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"])
    if result.returncode != 0:
        raise SystemExit(f"nvidia-smi failed: {result.stderr}")
    keys = fields.split(",")
    return [
        dict(zip(keys, (v.strip() for v in line.split(","))))
        for line in result.stdout.splitlines()
        if line
    ]


@contextlib.contextmanager
def driver_roots(paths: list[str]) -> Any:
    """A host driver seen where a driver container's configs look for it: each path linked to
    /, as long as the check runs (only paths that do not exist are made)."""
    made = []
    try:
        for path in paths:
            p = Path(path)
            if path != "/" and not p.exists() and not p.is_symlink():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.symlink_to("/")
                made.append(p)
        yield
    finally:
        for p in made:
            p.unlink()


def config_roots(config: dict[str, Any]) -> list[str]:
    flags = config.get("flags", {})
    plugin = flags.get("plugin", {})
    return [
        r
        for r in (
            flags.get("nvidiaDriverRoot"),
            flags.get("nvidiaDevRoot"),
            plugin.get("containerDriverRoot"),
        )
        if r
    ]


def expected_sharing(config: dict[str, Any]) -> tuple[str, int, bool]:
    sharing = config.get("sharing") or {}
    for key, name in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        section = sharing.get(key)
        if section and section.get("resources"):
            return (
                name,
                int(section["resources"][0]["replicas"]),
                bool(section.get("renameByDefault")),
            )
    return "none", 1, False


def check_gfd(
    report: Report,
    cluster: str,
    key: str,
    config_text: str,
    gfd: dict[str, Any],
    objects: list[dict[str, Any]],
    binaries: Path,
    work: Path,
    count: int,
) -> None:
    name = f"{cluster} gfd [{key}]"
    config = yaml.safe_load(config_text)
    config_file = work / "config.yaml"
    config_file.write_text(config_text)
    output = work / "gfd-labels"
    env = literal_env(container(gfd, "gpu-feature-discovery"))
    env["CONFIG_FILE"] = str(config_file)
    command = [
        str(binaries / "gpu-feature-discovery"),
        "--oneshot",
        "--no-timestamp",
        # Without an API server GFD writes its labels to a file (the NFD features.d format).
        "--use-node-feature-api=false",
        f"--output-file={output}",
    ]
    with driver_roots(config_roots(config)):
        result = run(command, env)
    if result.returncode != 0 or not output.exists():
        report.add(
            name,
            "FAIL",
            f"gpu-feature-discovery exited {result.returncode}",
            log=result.stderr[-3000:],
        )
        return
    labels = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    problems = []
    sharing, replicas, renamed = expected_sharing(config)
    for label, values in sorted(selected_labels(objects).items()):
        if label == MPS_CAPABLE:
            # Only the MPS control daemon selects it, and only nodes whose config shares with
            # MPS should run one (GFD: lm/resource.go, v0.20.0).
            want = "true" if sharing == "mps" else "false"
            if labels.get(label, "false") != want:
                problems.append(f"{label}: {labels.get(label)!r} with sharing {sharing}")
            continue
        if labels.get(label) not in values:
            problems.append(
                f"{label}: rendered selectors want {sorted(values)}, GFD gives {labels.get(label)!r}"
            )
    strategy = config["flags"]["migStrategy"]
    # GFD publishes the label under `single` and `mixed`, none under `none`
    # (internal/lm/mig-strategy.go NewResourceLabeler, v0.20.0).
    if labels.get("nvidia.com/mig.strategy", "none") != strategy:
        problems.append(
            f"nvidia.com/mig.strategy {labels.get('nvidia.com/mig.strategy')!r} for {strategy}"
        )
    if sharing != "none":
        if labels.get("nvidia.com/gpu.sharing-strategy") != sharing:
            problems.append(
                f"gpu.sharing-strategy {labels.get('nvidia.com/gpu.sharing-strategy')!r} for {sharing}"
            )
        if labels.get("nvidia.com/gpu.replicas") != str(replicas):
            problems.append(
                f"gpu.replicas {labels.get('nvidia.com/gpu.replicas')!r} for {replicas}"
            )
        if not renamed and not labels.get("nvidia.com/gpu.product", "").endswith("-SHARED"):
            problems.append("gpu.product does not say -SHARED for shared GPUs under their own name")
    if labels.get("nvidia.com/gpu.count") != str(count):
        problems.append(f"gpu.count {labels.get('nvidia.com/gpu.count')!r} for {count} GPUs")
    report.add(name, "FAIL" if problems else "PASS", "; ".join(problems), labels=labels)


def kubelet_running() -> bool:
    """Whether a kubelet answers on its device-plugin socket: the stand-in takes that path, so
    the plugin check runs only where none does."""
    path = DEVICE_PLUGIN_DIR / "kubelet.sock"
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def check_plugin(
    report: Report,
    cluster: str,
    key: str,
    config_text: str,
    plugin: dict[str, Any],
    binaries: Path,
    work: Path,
    count: int,
    mig_enabled: bool,
) -> dict[str, Any] | None:
    name = f"{cluster} device plugin [{key}]"
    config = yaml.safe_load(config_text)
    config_file = work / "config.yaml"
    config_file.write_text(config_text)
    env = literal_env(container(plugin, "nvidia-device-plugin"))
    env["CONFIG_FILE"] = str(config_file)
    sharing, replicas, renamed = expected_sharing(config)
    strategy = config["flags"]["migStrategy"]
    if sharing == "mps":
        # The plugin serves MPS shares only once the MPS control daemon runs, and that daemon
        # sets each GPU's compute mode to EXCLUSIVE_PROCESS (k8s-device-plugin
        # cmd/mps-control-daemon/mps/daemon.go, v0.20.0): a GPU setting this check leaves alone.
        report.add(
            name,
            "SKIP",
            "MPS needs the MPS control daemon, which sets the GPUs' compute mode; left alone",
        )
        return None
    if env.get("MPS_ROOT"):
        Path(env["MPS_ROOT"]).mkdir(parents=True, exist_ok=True)
    if kubelet_running():
        report.add(name, "SKIP", f"a kubelet serves {DEVICE_PLUGIN_DIR / 'kubelet.sock'} here")
        return None
    DEVICE_PLUGIN_DIR.mkdir(parents=True, exist_ok=True)
    stub_out = work / "kubelet.json"
    # Mixed MIG gives one resource per MIG profile; otherwise one.
    expect = 1
    with driver_roots(config_roots(config)), stub_out.open("w") as sink:
        stub = subprocess.Popen(
            [
                str(binaries / "kubelet-stub"),
                f"-dir={DEVICE_PLUGIN_DIR}",
                f"-expect={expect}",
                "-timeout=30s",
            ],
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for _ in range(100):
            if (DEVICE_PLUGIN_DIR / "kubelet.sock").exists():
                break
            time.sleep(0.05)
        base = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
        }
        server = subprocess.Popen(
            [str(binaries / "nvidia-device-plugin")],
            env={**base, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        # Until the stand-in has seen the plugin, the plugin has exited, or 30 s have passed.
        for _ in range(300):
            if stub.poll() is not None or server.poll() is not None:
                break
            time.sleep(0.1)
        if stub.poll() is None:
            stub.kill()
            stub.wait()
        server.send_signal(signal.SIGTERM)
        try:
            log, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            log, _ = server.communicate()
    try:
        seen = json.loads(stub_out.read_text())["registrations"] or []
    except (ValueError, KeyError):
        seen = []
    problems = []
    # GPUs whose MIG mode is off are served whole under every strategy (mixed gives one resource
    # per MIG profile only on GPUs in MIG mode; this check leaves MIG mode as it is).
    resource = "nvidia.com/gpu.shared" if renamed else "nvidia.com/gpu"
    if strategy != "none" and mig_enabled:
        resource = None
    if not seen:
        problems.append("no plugin registered")
    for registration in seen:
        if registration.get("error"):
            problems.append(f"{registration['resource']}: {registration['error']}")
    if resource and seen:
        names = [r["resource"] for r in seen]
        if names != [resource]:
            problems.append(f"registered {names}, the config means {resource}")
        else:
            devices = seen[0]["devices"]
            healthy = [d for d in devices if d["health"] == "Healthy"]
            want = count * replicas
            if len(healthy) != want:
                problems.append(
                    f"{len(healthy)} healthy devices advertised, the config means {want} ({count} GPUs x {replicas})"
                )
    allocation = seen[0].get("allocation") if seen else None
    if allocation and allocation.get("error"):
        problems.append(f"Allocate: {allocation['error']}")
    elif seen and seen[0].get("devices") and not allocation:
        problems.append("no Allocate answer for an advertised device")
    # With MIG mode on, the resources per MIG profile are not counted here: say so.
    note = "" if resource or not seen else "MIG mode on: resources registered, counts not checked"
    report.add(
        name,
        "FAIL" if problems else "PASS",
        "; ".join(problems) or note,
        registrations=seen,
        log=log[-4000:],
    )
    return allocation


def check_nfd_rule(report: Report, cluster: str, objects: list[dict[str, Any]]) -> None:
    rules = [o for o in objects if o.get("kind") == "NodeFeatureRule"]
    if not rules:
        return
    devices = []
    for device in Path("/sys/bus/pci/devices").iterdir():
        vendor = (device / "vendor").read_text().strip().removeprefix("0x")
        klass = (device / "class").read_text().strip().removeprefix("0x")[:4]
        devices.append({"vendor": vendor, "class": klass})
    for rule_object in rules:
        for rule in rule_object["spec"]["rules"]:
            for feature in rule.get("matchFeatures", []):
                if feature["feature"] != "pci.device":
                    continue
                matched = [
                    d
                    for d in devices
                    if all(
                        _nfd_match(d.get(attribute), expression)
                        for attribute, expression in feature["matchExpressions"].items()
                    )
                ]
                report.add(
                    f"{cluster} NFD rule {rule['name']}",
                    "PASS" if matched else "FAIL",
                    "" if matched else "no PCI device matches",
                    matched=matched,
                )


def _nfd_match(value: str | None, expression: dict[str, Any]) -> bool:
    if value is None:
        return False
    op, values = expression["op"], expression.get("value", [])
    if op == "In":
        return value in values
    if op == "InRegexp":
        return any(re.search(v, value) for v in values)
    return False


CONTAINER_ROOT = """
set -e
mount --make-rprivate /
for folder in usr bin sbin lib lib64 etc; do
    if [ -L "/$folder" ]; then ln -sfn "$(readlink "/$folder")" "$ROOT/$folder"
    elif [ -d "/$folder" ]; then mkdir -p "$ROOT/$folder"; mount --rbind "/$folder" "$ROOT/$folder"; fi
done
mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" "$ROOT/host" "$ROOT/host-dev-char" \
    "$ROOT/run/nvidia/validations" "$ROOT/validator"
mount --rbind /proc "$ROOT/proc"; mount --rbind /sys "$ROOT/sys"; mount --rbind /dev "$ROOT/dev"
mount --rbind "$HOST" "$ROOT/host"
mount --bind "$DEV_CHAR" "$ROOT/host-dev-char"
mount --bind "$VALIDATIONS" "$ROOT/run/nvidia/validations"
cp "$VALIDATOR" "$ROOT/validator/nvidia-validator"
exec chroot "$ROOT" /validator/nvidia-validator
"""


def check_validator_driver(
    report: Report, cluster: str, validator: dict[str, Any] | None, binaries: Path, work: Path
) -> None:
    name = f"{cluster} validator driver check"
    if validator is None:
        report.add(name, "SKIP", "no validator rendered")
        return
    init = [
        c
        for c in validator["spec"]["template"]["spec"].get("initContainers", [])
        if literal_env(c).get("COMPONENT") == "driver"
    ]
    if not init:
        report.add(name, "SKIP", "no driver validation rendered")
        return
    env = literal_env(init[0])
    env.pop("WITH_WAIT", None)  # one attempt: this host's driver is there or not
    validations = work / "validations"
    validations.mkdir()
    # A scratch folder for the /dev/char links, which stay out of this host's /dev/char.
    dev_char = work / "dev-char"
    dev_char.mkdir()
    # The validator's container, as its pod has it: a root of its own (in a temporary folder,
    # in a private mount namespace) holding the host's system folders for its own tools, the
    # host at /host (its host-root volume), /host-dev-char and the validations folder.
    root = work / "root"
    root.mkdir()
    script = CONTAINER_ROOT
    env.update(
        ROOT=str(root),
        HOST="/",
        DEV_CHAR=str(dev_char),
        VALIDATIONS=str(validations),
        VALIDATOR=str(binaries / "nvidia-validator"),
    )
    result = run(["unshare", "-m", "sh", "-c", script], env, timeout=300)
    log = result.stdout + result.stderr
    why = ""
    if result.returncode != 0 and "/sbin/modprobe': No such file" in log:
        # The validator loads the nvidia modules (through the host's modprobe) to create the
        # /dev/char links when the driver is not a loadable module it can see; a host without
        # modprobe cannot. The rest of the check runs again without the links.
        first = log
        env["DISABLE_DEV_CHAR_SYMLINK_CREATION"] = "true"
        # A root of its own again: the first one's copy of the validator may still be held.
        env["ROOT"] = str(work / "root-again")
        (work / "root-again").mkdir()
        result = run(["unshare", "-m", "sh", "-c", script], env, timeout=300)
        log = first + "\n--- again with DISABLE_DEV_CHAR_SYMLINK_CREATION=true ---\n"
        log += result.stdout + result.stderr
        why = "this host has no /sbin/modprobe: /dev/char links left out (DISABLE_DEV_CHAR_SYMLINK_CREATION)"
    ready = validations / "driver-ready"
    ok = result.returncode == 0 and ready.exists()
    report.add(
        name,
        "PASS" if ok else "FAIL",
        why if ok else f"exit {result.returncode}",
        ready_file=ready.read_text() if ready.exists() else None,
        log=log[-3000:],
    )


def check_toolkit(
    report: Report,
    cluster: str,
    objects: list[dict[str, Any]],
    binaries: Path,
    work: Path,
    allocation: dict[str, Any] | None,
) -> None:
    workload = find(objects, "DaemonSet", "nvidia-container-toolkit-daemonset")
    name = f"{cluster} toolkit installer and CDI"
    if workload is None:
        report.add(
            name, "SKIP", "no toolkit rendered (driver on the host, runtime configured there)"
        )
        return
    c = container(workload, "nvidia-container-toolkit-ctr")
    volumes = {
        v["name"]: v["hostPath"]["path"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    }
    mounts = sorted(
        (
            (m["mountPath"].rstrip("/") or "/", volumes[m["name"]])
            for m in c.get("volumeMounts", [])
            if m["name"] in volumes
        ),
        key=lambda m: -len(m[0]),
    )
    host = Path(tempfile.mkdtemp(prefix="gs-", dir="/tmp")) / "h"
    host.mkdir()

    def in_host(value: str) -> str:
        for inside, outside in mounts:
            if value == inside or value.startswith(inside.rstrip("/") + "/"):
                return str(host) + outside.rstrip("/") + value[len(inside.rstrip("/")) :]
        return value

    env = {k: in_host(v) for k, v in literal_env(c).items()}
    # The driver the installer reads for the management CDI spec: this host's.
    for _, outside in mounts:
        if outside in ("/run/nvidia/driver", "/"):
            target = host / outside.lstrip("/")
            if outside != "/":
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.symlink_to("/")
    for key in ("RUNTIME_CONFIG", "RUNTIME_DROP_IN_CONFIG", "TOOLKIT_PID_FILE", "RUNTIME_SOCKET"):
        if key in env:
            Path(env[key]).parent.mkdir(parents=True, exist_ok=True)
    # The image's artifacts: the two Go tools built here; the rest of the image's files are
    # placeholders the installer copies (no container runs on this node).
    artifacts = work / "artifacts"
    (artifacts / "usr/bin").mkdir(parents=True)
    (artifacts / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    for tool in ("nvidia-ctk", "nvidia-cdi-hook"):
        source = binaries / tool if (binaries / tool).exists() else binaries / "nvidia-ctk"
        shutil.copy(source, artifacts / "usr/bin" / tool)
    for tool in (
        "nvidia-container-cli",
        "nvidia-container-runtime-hook",
        "nvidia-container-runtime",
        "nvidia-container-runtime.cdi",
        "nvidia-container-runtime.legacy",
    ):
        (artifacts / "usr/bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (artifacts / "usr/bin" / tool).chmod(0o755)
    for library in ("libnvidia-container.so.1", "libnvidia-container-go.so.1"):
        (artifacts / "usr/lib/x86_64-linux-gnu" / library).write_bytes(b"\x7fELF")
    env["TOOLKIT_SOURCE_ROOT"] = str(artifacts)
    env["NO_DAEMON"] = "true"
    # The installer's default CDI folder is a path in its container, mounted from the host's
    # /var/run/cdi: the same folder in the temporary host root.
    env.setdefault("CDI_OUTPUT_DIR", in_host("/var/run/cdi"))
    # No container runtime runs here: nothing to signal.
    env["RUNTIME_RESTART_MODE"] = "none"
    result = run([str(binaries / "nvidia-ctk-installer")], env, timeout=300)
    cdi_dir = Path(env.get("CDI_OUTPUT_DIR", in_host("/var/run/cdi")))
    specs = sorted(p.name for p in cdi_dir.glob("*")) if cdi_dir.exists() else []
    problems = []
    if result.returncode != 0:
        problems.append(f"installer exited {result.returncode}")
    if env.get("CDI_ENABLED") == "true" and not specs:
        problems.append("no management CDI spec written")
    listed = (
        run([str(binaries / "nvidia-ctk"), "cdi", "list", f"--spec-dir={cdi_dir}"])
        if specs
        else None
    )
    names = sorted(set(re.findall(r"^\S+/\S+=\S+$", listed.stdout, re.M))) if listed else []
    # The plugin's CDI names: each must be a device some spec on this node declares, the plugin's
    # own (it writes them to /var/run/cdi as it starts) or the toolkit's.
    plugin_names = (allocation or {}).get("cdiDevices") or []
    plugin_specs = run([str(binaries / "nvidia-ctk"), "cdi", "list", "--spec-dir=/var/run/cdi"])
    known = set(re.findall(r"^\S+/\S+=\S+$", plugin_specs.stdout, re.M)) | set(names)
    for device in plugin_names:
        if device not in known:
            problems.append(f"the plugin hands out {device}, which no CDI spec declares")
    report.add(
        name,
        "FAIL" if problems else "PASS",
        "; ".join(problems),
        management_devices=names,
        plugin_cdi_devices=plugin_names,
        log=result.stderr[-3000:],
    )


# A vector addition, the validator's and the smoke test's workload (the cuda-sample vectorAdd),
# as PTX the driver compiles: c[i] = a[i] + b[i].
VECTOR_ADD_PTX = b"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry add(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
  .reg .pred p; .reg .b32 r<5>; .reg .f32 f<4>; .reg .b64 d<11>;
  ld.param.u64 d1, [a]; ld.param.u64 d2, [b]; ld.param.u64 d3, [c]; ld.param.u32 r1, [n];
  mov.u32 r2, %ctaid.x; mov.u32 r3, %ntid.x; mov.u32 r4, %tid.x; mad.lo.s32 r2, r2, r3, r4;
  setp.ge.s32 p, r2, r1; @p bra done;
  cvta.to.global.u64 d4, d1; cvta.to.global.u64 d5, d2; cvta.to.global.u64 d6, d3;
  mul.wide.s32 d7, r2, 4; add.s64 d8, d4, d7; add.s64 d9, d5, d7; add.s64 d10, d6, d7;
  ld.global.f32 f1, [d8]; ld.global.f32 f2, [d9]; add.f32 f3, f1, f2; st.global.f32 [d10], f3;
done:
  ret;
}
\x00"""


def check_cuda(report: Report, count: int) -> None:
    name = "CUDA vector addition on each GPU"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        report.add(name, "FAIL", f"libcuda.so.1: {error}")
        return

    def call(function: str, *args: Any) -> None:
        status = getattr(cuda, function)(*args)
        if status != 0:
            raise RuntimeError(f"{function} returned CUDA error {status}")

    n = 1 << 16
    results = []
    try:
        call("cuInit", 0)
        found = ctypes.c_int()
        call("cuDeviceGetCount", ctypes.byref(found))
        for index in range(found.value):
            device = ctypes.c_int()
            call("cuDeviceGet", ctypes.byref(device), index)
            context = ctypes.c_void_p()
            call("cuCtxCreate_v2", ctypes.byref(context), 0, device)
            module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
            call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(VECTOR_ADD_PTX))
            call("cuModuleGetFunction", ctypes.byref(kernel), module, b"add")
            host_a = (ctypes.c_float * n)(*[float(i) for i in range(n)])
            host_b = (ctypes.c_float * n)(*[float(2 * i) for i in range(n)])
            host_c = (ctypes.c_float * n)()
            buffers = [ctypes.c_uint64() for _ in range(3)]
            for buffer in buffers:
                call("cuMemAlloc_v2", ctypes.byref(buffer), ctypes.c_size_t(4 * n))
            call("cuMemcpyHtoD_v2", buffers[0], host_a, ctypes.c_size_t(4 * n))
            call("cuMemcpyHtoD_v2", buffers[1], host_b, ctypes.c_size_t(4 * n))
            size = ctypes.c_uint32(n)
            params = (ctypes.c_void_p * 4)(
                *[ctypes.cast(ctypes.byref(b), ctypes.c_void_p) for b in buffers],
                ctypes.cast(ctypes.byref(size), ctypes.c_void_p),
            )
            call("cuLaunchKernel", kernel, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None, params, None)
            call("cuCtxSynchronize")
            call("cuMemcpyDtoH_v2", host_c, buffers[2], ctypes.c_size_t(4 * n))
            wrong = sum(1 for i in range(n) if host_c[i] != 3.0 * i)
            results.append({"device": index, "elements": n, "wrong": wrong})
            for buffer in buffers:
                cuda.cuMemFree_v2(buffer)
            cuda.cuCtxDestroy_v2(context)
    except RuntimeError as error:
        report.add(name, "FAIL", str(error), results=results)
        return
    bad = [r for r in results if r["wrong"]] or (len(results) != count and results)
    report.add(
        name,
        "FAIL" if bad or not results else "PASS",
        "" if results and not bad else f"{results}",
        results=results,
    )


def guarded(report: Report, name: str, check: Any, *args: Any) -> Any:
    """A check that raised is a failure of that check, not the end of the run."""
    try:
        return check(*args)
    except Exception as error:
        report.add(name, "FAIL", f"{type(error).__name__}: {error}")
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "clusters", nargs="+", type=Path, help="rendered cluster folders (out/NAME)"
    )
    parser.add_argument("--bin", type=Path, required=True, help="folder of NVIDIA's binaries")
    parser.add_argument("--report", type=Path, help="write the details here as JSON")
    arguments = parser.parse_args()
    # Everything it needs, said before anything runs (usage errors exit 2, as argparse's do).
    absent = [name for name in BINARIES if not (arguments.bin / name).is_file()]
    if absent:
        parser.error(f"--bin {arguments.bin} lacks {', '.join(absent)} (see docs/node-check.md)")
    for folder in arguments.clusters:
        if not (folder / "kustomization.yaml").is_file():
            parser.error(f"{folder} is not a rendered cluster folder (no kustomization.yaml)")
    if os.geteuid() != 0:
        parser.error("run it as root: the device plugin serves in /var/lib/kubelet/device-plugins")
    if shutil.which("nvidia-smi") is None:
        parser.error("no nvidia-smi on PATH: this is not a GPU node with its driver")
    report = Report()
    node = gpus()
    count = len(node)
    first = node[0]
    print(
        f"GPUs: {count} x {first['name']}, driver {first['driver_version']}, MIG {first['mig.mode.current']}",
        flush=True,
    )
    mig_enabled = any(gpu["mig.mode.current"] == "Enabled" for gpu in node)
    guarded(report, "CUDA", check_cuda, report, count)
    work = Path(tempfile.mkdtemp(prefix="gpustack-node-check-"))
    for folder in arguments.clusters:
        cluster = folder.name
        objects = load_objects(folder)
        (work / cluster).mkdir(parents=True)
        guarded(report, f"{cluster} NFD rule", check_nfd_rule, report, cluster, objects)
        config_map = find(objects, "ConfigMap", PLUGIN_CONFIG_MAP)
        plugin = find(objects, "DaemonSet", "nvidia-device-plugin")
        gfd = find(objects, "DaemonSet", "gpu-feature-discovery")
        allocation = None
        for key, text in sorted((config_map or {}).get("data", {}).items()):
            place = work / cluster / key
            place.mkdir(parents=True)
            if gfd is not None:
                guarded(
                    report,
                    f"{cluster} gfd [{key}]",
                    check_gfd,
                    report,
                    cluster,
                    key,
                    text,
                    gfd,
                    objects,
                    arguments.bin,
                    place,
                    count,
                )
            if plugin is not None:
                got = guarded(
                    report,
                    f"{cluster} device plugin [{key}]",
                    check_plugin,
                    report,
                    cluster,
                    key,
                    text,
                    plugin,
                    arguments.bin,
                    place,
                    count,
                    mig_enabled,
                )
                allocation = allocation or got
        validator = find(objects, "DaemonSet", "nvidia-operator-validator")
        guarded(
            report,
            f"{cluster} validator",
            check_validator_driver,
            report,
            cluster,
            validator,
            arguments.bin,
            Path(tempfile.mkdtemp(dir=work / cluster)),
        )
        guarded(
            report,
            f"{cluster} toolkit",
            check_toolkit,
            report,
            cluster,
            objects,
            arguments.bin,
            Path(tempfile.mkdtemp(dir=work / cluster)),
            allocation,
        )
        # After each cluster, so that a run cut short keeps what it found.
        if arguments.report:
            arguments.report.write_text(
                json.dumps({"gpus": node, "checks": report.checks}, indent=2) + "\n"
            )
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
