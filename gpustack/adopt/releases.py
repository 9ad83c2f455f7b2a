"""The GPU Operator releases the importer knows: each release's images and switches
(`gpu_operator_releases.yaml`: NVIDIA/gpu-operator deployments/gpu-operator/values.yaml at its
tag, and api/nvidia/v1/clusterpolicy_types.go's defaults), which release an input was written
for, the settings the operator uses for what an input leaves out, and the tag gpustack runs for
a release's image tag."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from gpustack.adopt.inputs import CLUSTER_POLICY, Input, value_at
from gpustack.config.model import field_accepts
from gpustack.errors import UserError

# Each GPU Operator release's defaults (images, CDI, the exporter's ServiceMonitor).
RELEASES_DATA = Path(__file__).with_name("gpu_operator_releases.yaml")


Image = tuple[str, str, str]  # repository, image, version


@dataclass(frozen=True)
class Release:
    """What one GPU Operator release runs for the fields an input leaves out."""

    version: str
    images: dict[str, Image]
    cdi: bool  # the chart's cdi.enabled (and the CRD's default from v25.10.0)
    service_monitor: bool  # the chart's dcgmExporter.serviceMonitor.enabled
    manager_env: dict[str, str]  # the chart's driver.manager.env, where the release sets it


@cache
def releases() -> dict[str, Release]:
    """The releases the importer knows, oldest first."""
    data = yaml.safe_load(RELEASES_DATA.read_text(encoding="utf-8"))
    found = {}
    for version, facts in data["releases"].items():
        images = {}
        for component, reference in facts["images"].items():
            path, tag = reference.rsplit(":", 1)
            repository, image = path.rsplit("/", 1)
            images[component] = (repository, image, tag)
        found[version] = Release(
            version,
            images,
            facts["cdi"],
            facts["serviceMonitor"],
            dict(facts.get("managerEnv") or {}),
        )
    return dict(sorted(found.items(), key=lambda item: release_key(item[0])))


# A release number's part: a few digits. An input may write thousands, which no release has and
# which Python refuses to read as a number (int() above 4,300 digits raises).
NUMBER = "[0-9]{1,9}"


def release_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def newest_release() -> Release:
    return list(releases().values())[-1]


# The device-plugin chart's image (NVIDIA/k8s-device-plugin deployments/helm/
# nvidia-device-plugin/values.yaml, v0.20.0: the tag defaults to the chart's appVersion).
PLUGIN_CHART_IMAGE = ("nvcr.io/nvidia/k8s-device-plugin", "v0.20.0")


# The registry every upstream image above comes from.
UPSTREAM_REGISTRY = "nvcr.io"


# The labels the operator's chart puts on its ClusterPolicy (deployments/gpu-operator/templates/
# _helpers.tpl gpu-operator.labels, v26.7.0): the release it was installed with.
_VERSION_LABELS = ("app.kubernetes.io/version", "helm.sh/chart")


def labelled_release(each: Input) -> tuple[str, str] | None:
    """The release a ClusterPolicy's Helm labels name, with the label."""
    labels = value_at(each.data, ("metadata", "labels"))
    if each.kind != CLUSTER_POLICY or not isinstance(labels, dict):
        return None
    for label in _VERSION_LABELS:
        written = labels.get(label)
        found = re.search(
            rf"(?<![0-9.])v?({NUMBER}\.{NUMBER}\.{NUMBER})$",
            written if isinstance(written, str) else "",
        )
        if found is not None:
            return f"v{found.group(1)}", label
    return None


def choose_release(inputs: list[Input], given: str | None) -> tuple[Release, str]:
    """The operator release whose defaults fill in what the inputs leave out, and why."""
    known = releases()
    if given is not None:
        version = given if given.startswith("v") else f"v{given}"
        if version not in known:
            raise UserError(
                "--operator-version: not a GPU Operator release the importer knows",
                hint=f"one of: {', '.join(known)}",
            )
        return known[version], "given with --operator-version"
    for each in inputs:
        labelled = labelled_release(each)
        if labelled is None:
            continue
        version, label = labelled
        if version in known:
            return known[version], f"the ClusterPolicy's label {label}"
        # A release the importer does not list: the closest older one of its line, else the
        # newest (a later release than the importer knows).
        line = [
            each
            for each in known
            if release_key(each)[:2] == release_key(version)[:2]
            and release_key(each) < release_key(version)
        ]
        chosen = known[line[-1]] if line else newest_release()
        return chosen, (
            f"the ClusterPolicy's label {label} names a release the importer does not list; "
            f"the closest it knows; give --operator-version"
        )
    return newest_release(), (
        "the inputs do not name the operator release: the newest the importer knows; give "
        "--operator-version with the release installed (`helm list -n gpu-operator`)"
    )


# What every release's operator does with a field a ClusterPolicy leaves out
# (api/nvidia/v1/clusterpolicy_types.go IsEnabled methods: the driver, the toolkit, the device
# plugin, GFD, the DCGM exporter and the MIG manager run unless switched off; the node status
# exporter does not; controllers/object_controls.go ServiceMonitor: none without
# dcgmExporter.serviceMonitor; applyMIGConfiguration: no MIG_STRATEGY, the plugin's own `none`).
_RUN_UNLESS_OFF = ("driver", "toolkit", "devicePlugin", "gfd", "dcgmExporter", "migManager")


def operator_defaults(release: Release, chart: bool) -> dict[str, Any]:
    """The operator's settings for what an input leaves out, in the values' (and the spec's)
    layout: the chart's values.yaml for a values file (`chart`), else the operator's own."""
    data: dict[str, Any] = {}
    for component, (repository, image, version) in release.images.items():
        node = data
        for part in component.split("."):
            node = node.setdefault(part, {})
        node.update(repository=repository, image=image, version=version)
    for section in _RUN_UNLESS_OFF:
        data[section]["enabled"] = True
    data["nodeStatusExporter"]["enabled"] = False
    data["cdi"] = {"enabled": release.cdi}
    if chart and release.manager_env:
        data["driver"]["manager"]["env"] = [
            {"name": name, "value": value} for name, value in release.manager_env.items()
        ]
    data["dcgmExporter"]["serviceMonitor"] = {"enabled": chart and release.service_monitor}
    if chart:
        data["mig"] = {"strategy": "single"}  # values.yaml `mig.strategy`, every release
    return data


# A release tag with the base image's distribution: how the operator's charts before v25.10.0
# pin the Container Toolkit, the MIG manager, the device plugin and the driver manager
# (`v1.17.8-ubuntu20.04`, `v0.12.3-ubuntu20.04`, `v0.15.0-ubi8`). Each project publishes the
# same release under its short tag too (NVIDIA/nvidia-container-toolkit and NVIDIA/mig-parted
# deployments/container/Makefile `push-short`: "we also push a short tag equal to the version"),
# the tag gpustack runs.
_DISTRO_TAG = re.compile(
    rf"(v{NUMBER}\.{NUMBER}\.{NUMBER})-(ubuntu[0-9.]+|ubi[0-9]+|rhel[0-9.]+|centos[0-9]+)"
)


# dcgm-exporter's `<DCGM>-<exporter>-<distribution>`: gpustack runs the `-distroless` image,
# published from 4.4.1-4.6.0 (the release GPU Operator v25.10.0 moved to, NVIDIA/gpu-operator
# #1770 "Use distroless tag for dcgm-exporter"); an older release has only its distribution
# images, which run the exporter differently.
_EXPORTER_TAG = re.compile(
    rf"({NUMBER}\.{NUMBER}\.{NUMBER})-({NUMBER}\.{NUMBER}\.{NUMBER})-"
    r"(distroless|ubuntu[0-9.]+|ubi[0-9]+)"
)


_FIRST_DISTROLESS_EXPORTER = ((4, 4, 1), (4, 6, 0))


# Components that gpustack runs from the operator's own image (nvcr.io/nvidia/gpu-operator).
VALIDATOR_IMAGE = ("validator", "nodeStatusExporter")


def short_tag(component: str, written: str) -> tuple[str, str | None]:
    """The tag gpustack runs for the operator's `written` tag, and why, where it differs; or
    ("", why) where gpustack cannot run that release."""
    if component == "dcgmExporter":
        found = _EXPORTER_TAG.fullmatch(written)
        if found is None:
            return written, None
        dcgm, exporter, variant = found.groups()
        release = (release_key(dcgm), release_key(exporter))
        if variant != "distroless" and release < _FIRST_DISTROLESS_EXPORTER:
            return "", (
                "an exporter release before 4.4.1-4.6.0, published without the distroless "
                "image of gpustack's exporter: the config keeps gpustack's own "
                "(dcgmExporter.version)"
            )
        why = None if variant == "distroless" else "the release's distroless image"
        return f"{dcgm}-{exporter}", why
    if component in VALIDATOR_IMAGE:
        if not re.fullmatch(rf"v{NUMBER}\.{NUMBER}\.{NUMBER}", written):
            return written, None  # no release: the field check says so
        if field_accepts(f"{component}.version", written):
            return written, None
        return "", (
            "gpustack's validator runs nvidia-validator from the GPU Operator's own image, "
            "which carries it from v25.10.0 on (before, the validator was an image of its own, "
            "gpu-operator-validator): the config keeps gpustack's own (" + component + ".version)"
        )
    found = _DISTRO_TAG.fullmatch(written)
    if found is None:
        return written, None
    return found.group(1), "the release its distribution-suffixed tag names (its short tag)"


def same_release(operator: str, gpustack: str) -> bool:
    """Two image references name the same release of the same image: a distribution-suffixed
    tag is its release's short tag (and dcgm-exporter's distroless one)."""
    if operator == gpustack:
        return True
    path, _, tag = operator.rpartition(":")
    other_path, _, other_tag = gpustack.rpartition(":")
    if path != other_path:
        return False
    component = "dcgmExporter" if path.endswith("/dcgm-exporter") else ""
    short = short_tag(component, tag)[0] if component else short_tag("", tag)[0]
    if component:
        return bool(short) and other_tag in (short, f"{short}-distroless")
    return short == other_tag
