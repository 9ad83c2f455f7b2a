"""MIG configs in mig-parted's file format: the built-in ones, and checking a user's file.

mig-parted (NVIDIA/mig-parted api/spec/v1/spec.go, v0.15.0) reads `version: v1` and
`mig-configs`, a map from config name (the value of the node label nvidia.com/mig.config) to a
list of entries, each with `devices` ("all" or GPU indexes), `mig-enabled`, `mig-devices` (MIG
profile -> instance count) and optionally `device-filter` (PCI device IDs). The built-in configs
are written from `mig_parted_defaults.yaml`; a user's file is checked as mig-parted would check
it, so a mistake shows at render time with its line and column, not as a failed label later.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from gpustack.config.component_settings import MIG_DISABLED
from gpustack.errors import UserError, describe
from gpustack.read.yamlio import Document

# The node labels the MIG manager (NVIDIA/mig-parted's nvidia-mig-manager, components/mig_manager.py)
# reads a node's MIG config name from and reports its state in.
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"

DEFAULTS = Path(__file__).with_name("mig_parted_defaults.yaml")
VERSION = "v1"
# A MIG profile as mig-parted parses it (pkg/types/mig_profile.go): [<c>c.]<g>g.<memory>gb with
# attributes such as +me, +gfx, +me.all or -me.
PROFILE = re.compile(r"^([1-9][0-9]*c\.)?[1-9][0-9]*g\.[1-9][0-9]*gb([+-][a-z]+(\.[a-z]+)*)?$")
_ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")

Configs = dict[str, list[dict[str, Any]]]


def config_name(profile: str) -> str:
    """The name of the config that fills every GPU with `profile` (1g.5gb+me -> all-1g.5gb.me)."""
    return "all-" + profile.replace("+", ".")


@cache
def builtin_configs() -> Configs:
    """The MIG manager's default configs, by name (callers must not change them)."""
    data = yaml.safe_load(DEFAULTS.read_text())
    configs: Configs = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for profile, count in data["uniform"].items():
        configs[config_name(profile)] = [
            {"devices": "all", "mig-enabled": True, "mig-devices": {profile: count}}
        ]
    for name, entries in data["perGPU"].items():
        configs[name] = [
            {
                "device-filter": [pci_id for gpu in entry["gpus"] for pci_id in data["gpus"][gpu]],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": dict(entry["devices"]),
            }
            for entry in entries
        ]
    return configs


def parse_user_configs(document: Document) -> Configs:
    """The `mig-configs` of a user's mig-parted file, checked as mig-parted checks them."""
    data = document.data
    source = document.source

    def fail(message: str, path: tuple[str | int, ...], hint: str | None = None) -> UserError:
        shown = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" if index else str(part)
            for index, part in enumerate(path)
        )
        return UserError(message, source.nearest(path), shown or None, hint)

    # Until the file is recognisably a mig-parted config, nothing of it is quoted: a path field
    # may name any file on the machine (a key, a token), and errors end up in CI logs.
    if not isinstance(data, dict) or "mig-configs" not in data:
        raise fail(
            "not a mig-parted config (a mapping with version and mig-configs); its content is "
            "not shown",
            (),
        )
    unknown = sorted(set(data) - {"version", "mig-configs"}, key=str)
    if unknown:
        raise UserError(
            "unknown field", source.nearest((unknown[0],)), hint="allowed: version, mig-configs"
        )
    if data.get("version") != VERSION:
        raise fail(f"version must be {VERSION!r}", ("version",))
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise fail("expected a mapping with at least one MIG config", ("mig-configs",))
    for name, entries in configs.items():
        path: tuple[str | int, ...] = ("mig-configs", name)
        if (
            not isinstance(name, str)
            or not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", name)
            or len(name) > 63
        ):
            raise fail(
                f"{describe(name)} is not a valid config name: it becomes the value of the "
                "label nvidia.com/mig.config (at most 63 letters, digits, '-', '_' or '.')",
                path,
            )
        if not isinstance(entries, list) or not entries:
            raise fail("expected a list with at least one entry", path)
        for index, entry in enumerate(entries):
            _check_entry(entry, (*path, index), fail)
            if name == MIG_DISABLED and entry["mig-enabled"]:
                # gpustack gives this config to the nodes of a pool whose device plugin uses
                # no MIG (GPUStack.pool_settings): partitioned, their GPUs would vanish.
                raise fail(
                    f"{MIG_DISABLED} is the config gpustack gives the nodes of a pool whose "
                    "device plugin uses no MIG, to keep their GPUs whole; it cannot turn MIG on",
                    (*path, index, "mig-enabled"),
                    "give this layout a name of its own",
                )
    return configs


def _check_entry(entry: Any, path: tuple[str | int, ...], fail: Any) -> None:
    if not isinstance(entry, dict):
        raise fail(
            f"expected a mapping (devices, mig-enabled, mig-devices), found {describe(entry)}", path
        )
    for key in entry:
        if key not in _ENTRY_FIELDS:
            raise fail(
                f"unknown field {key!r}", (*path, key), f"allowed: {', '.join(_ENTRY_FIELDS)}"
            )
    for required in ("devices", "mig-enabled"):
        if required not in entry:
            raise fail(f"required field {required!r} missing", path)
    devices = entry["devices"]
    if devices != "all" and not isinstance(devices, list):
        raise fail(
            f"devices must be 'all' or a list of GPU indexes, not {describe(devices)}",
            (*path, "devices"),
        )
    if isinstance(devices, list):
        for index, item in enumerate(devices):
            if not (isinstance(item, int) and not isinstance(item, bool) and item >= 0):
                # mig-parted reads a negative index and matches no GPU with it, silently.
                raise fail(
                    "devices lists GPU indexes, whole numbers from 0: this is not one",
                    (*path, "devices", index),
                )
    device_filter = entry.get("device-filter")
    if device_filter is not None and not (
        isinstance(device_filter, str)
        or (
            isinstance(device_filter, list) and all(isinstance(item, str) for item in device_filter)
        )
    ):
        raise fail(
            "device-filter must be a PCI device ID or a list of them", (*path, "device-filter")
        )
    enabled = entry["mig-enabled"]
    if not isinstance(enabled, bool):
        raise fail(
            f"mig-enabled must be true or false, not {describe(enabled)}", (*path, "mig-enabled")
        )
    mig_devices = entry.get("mig-devices")
    if enabled and mig_devices is None:
        raise fail("mig-devices is required when mig-enabled is true", path)
    if not enabled and mig_devices:
        raise fail("mig-devices given while mig-enabled is false", (*path, "mig-devices"))
    if mig_devices is None:
        return
    if not isinstance(mig_devices, dict):
        raise fail(
            f"mig-devices must map MIG profiles to counts, not {describe(mig_devices)}",
            (*path, "mig-devices"),
        )
    for profile, count in mig_devices.items():
        where = (*path, "mig-devices", profile)
        if not isinstance(profile, str) or not PROFILE.match(profile):
            raise fail(
                f"{describe(profile)} is not a MIG profile",
                where,
                "MIG profiles look like '1g.10gb', '3g.40gb' or '1g.10gb+me'",
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise fail(
                f"the count of {profile} must be a whole number, not {describe(count)}", where
            )
    if mig_devices and not any(mig_devices.values()):
        raise fail("all counts in mig-devices are 0", (*path, "mig-devices"))
