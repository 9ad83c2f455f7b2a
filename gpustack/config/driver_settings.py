"""The config section of the NVIDIA driver: who installs it, which version, for which kernels or
RHCOS builds, and how a driver change rolls over the GPU nodes."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from gpustack.config.field_types import (
    IMAGE_BY_DIGEST,
    KERNEL_RELEASE,
    RHCOS_BUILD,
    ConflictError,
    Doc,
    ReleaseTag,
    Strict,
    WithResources,
)


class RhcosBuild(Strict):
    """One RHCOS build of an OpenShift cluster and the Driver Toolkit image made for it."""

    rhcosVersion: Annotated[str, Field(pattern=RHCOS_BUILD), Doc(type="RHCOS build")] = Field(
        description="the build, as NFD's `system-os_release.OSTREE_VERSION` label names it",
    )
    driverToolkitImage: Annotated[
        str, Field(pattern=IMAGE_BY_DIGEST), Doc(type="image by digest")
    ] = Field(
        description="that build's Driver Toolkit image, by digest (the ImageStream tag's image)",
    )


DriverMode = Literal["preinstalled", "container", "driver-toolkit", "gke-managed", "gke-installer"]

# A DaemonSet's rollingUpdate.maxUnavailable: a number of nodes or a percentage of them, never 0
# (apps/v1 DaemonSetSpec: it may not be 0 while maxSurge is 0, and the driver cannot surge).
MaxUnavailable = Annotated[
    Annotated[int, Field(ge=1)] | Annotated[str, Field(pattern=r"^([1-9][0-9]?|100)%$")],
    Doc(type="nodes (≥ 1) or percentage (`1%`..`100%`)"),
]


class DriverDrain(Strict):
    """k8s-driver-manager's node drain (NVIDIA/k8s-driver-manager v0.12.0 cmd/driver-manager
    ENABLE_AUTO_DRAIN, DRAIN_*): kubectl's drain of the node's pods when evicting the GPU pods is
    not enough to unload the old driver. It drains without setting DaemonSet pods aside
    (internal/kubernetes/client.go DrainNode: no IgnoreAllDaemonSets), so a drain of every pod
    meets a DaemonSet's pod (the driver pod itself) and fails: `podSelector` names the pods, and
    `enabled` without it is refused (gpustack.resolve.checks.driver.check_drain)."""

    enabled: bool = Field(
        default=False,
        description=(
            "drain the node's pods that `podSelector` matches when the GPU pods' eviction fails "
            "or the old driver stays in use (`ENABLE_AUTO_DRAIN`); needs `podSelector`: "
            "k8s-driver-manager does not set DaemonSet pods aside, so a drain of every pod "
            "meets the driver's own pod and fails, and is refused"
        ),
    )
    # gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) driver.upgradePolicy.drain:
    # "It's recommended to set a timeout to avoid infinite drain".
    timeoutSeconds: Annotated[int, Field(ge=0), Doc(type="seconds")] = Field(
        default=300,
        description=(
            "how long eviction and the drain may take, 0: no limit (`DRAIN_TIMEOUT_SECONDS`); "
            "a stopping driver pod's eviction: an hour"
        ),
    )
    podSelector: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9_./=!,() -]*$", max_length=1024),
        Doc(type="label selector", default="none (every pod)"),
    ] = Field(
        default="",
        description=(
            "drain only the pods this label selector matches, none of a DaemonSet's "
            "(`DRAIN_POD_SELECTOR_LABEL`)"
        ),
    )
    deleteEmptyDir: bool = Field(
        default=False,
        description="evict pods with `emptyDir` volumes, losing their data (`DRAIN_DELETE_EMPTYDIR_DATA`)",
    )
    force: bool = Field(
        default=False,
        description="also delete pods no controller manages (`DRAIN_USE_FORCE`)",
    )


class DriverUpgrade(Strict):
    maxUnavailable: MaxUnavailable = Field(
        default=1,
        description=(
            "how many GPU nodes at a time the driver DaemonSet's rolling update takes down; "
            "the next node waits until this one's new driver pod is Ready"
        ),
    )
    gpuPodEviction: bool = Field(
        default=True,
        description=(
            "evict the pods that use GPUs on the node before the old driver's daemons stop "
            "(as its driver pod stops) and before it is unloaded (`ENABLE_GPU_POD_EVICTION`)"
        ),
    )
    drain: DriverDrain = Field(default_factory=DriverDrain)


class DriverManager(Strict):
    # NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) `driver.manager.version`.
    version: ReleaseTag = Field(
        default="v0.12.0",
        description=(
            "k8s-driver-manager image tag (`nvcr.io/nvidia/cloud-native/k8s-driver-manager`), "
            "the driver pod's init container"
        ),
    )


class Driver(WithResources):
    components = ("nvidia-driver",)
    container = "the driver container"
    mode: Annotated[Literal["auto"] | DriverMode, Doc(see="Driver and container runtime")] = Field(
        default="auto",
        description=(
            "who installs the driver; `auto`: the profile's default; must be one of the "
            "profile's modes"
        ),
    )
    # gpu-operator deployments/gpu-operator/values.yaml `driver.version` (v26.7.0).
    version: Annotated[
        str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"), Doc(type="driver version")
    ] = Field(
        default="595.91.07",
        description="NVIDIA driver of the driver container (GPU Operator v26.7.0's default)",
    )
    nodeOS: Annotated[
        str,
        Field(pattern=r"^(ubuntu[0-9]{2}\.[0-9]{2}|rhel[0-9]+\.[0-9]+)$"),
        Doc(type="`ubuntuNN.NN` | `rhelN.N`"),
    ] = Field(
        default="ubuntu22.04",
        description=(
            "the GPU nodes' OS, mode `container`: the image tag suffix (e.g. `ubuntu22.04`, "
            "`ubuntu24.04`, `rhel9.6`), and the driver selects only nodes whose NFD "
            "`system-os_release` labels match; OpenShift's is RHCOS, from "
            "`platform.openshiftVersion`"
        ),
    )
    precompiled: bool = Field(
        default=False,
        description=(
            "mode `container` on Ubuntu: NVIDIA's precompiled image for `kernelVersion` "
            "instead of building the driver on the node"
        ),
    )
    kernelVersion: Annotated[
        Annotated[str, Field(pattern=KERNEL_RELEASE)] | None,
        Doc(type="kernel release", default="none (with `precompiled`, this or `kernelVersions`)"),
    ] = Field(
        default=None,
        description=(
            "the GPU nodes' `uname -r`, e.g. `6.8.0-60-generic`; the driver selects only "
            "nodes with that kernel"
        ),
    )
    kernelVersions: Annotated[
        # `nvidia-driver-daemonset-<kernel>` names a DaemonSet and a label value: 63 at most.
        list[Annotated[str, Field(pattern=KERNEL_RELEASE, max_length=39)]],
        Doc(type="list of kernel releases", see="Driver and container runtime"),
    ] = Field(
        default_factory=list,
        description=(
            "with `precompiled`: one driver DaemonSet per kernel, each with NVIDIA's "
            "precompiled image for it and on the nodes NFD labels with that kernel "
            "(`kernel-version.full`), so nodes keep a driver through a rolling kernel upgrade "
            "(list the old and the new kernel); the many-kernel form of `kernelVersion`"
        ),
    )
    driverToolkitImage: Annotated[
        str | None, Doc(type="image", default="profile (`facts.driver.driverToolkitImage`)")
    ] = Field(
        default=None,
        description=(
            "OpenShift: the Driver Toolkit image whose kernel matches the nodes' RHCOS (the "
            "`driver-toolkit` image that `oc adm release info` lists for the cluster's "
            "release)"
        ),
    )
    rhcosVersion: Annotated[
        Annotated[str, Field(pattern=RHCOS_BUILD)] | None,
        Doc(type="RHCOS build"),
    ] = Field(
        default=None,
        description=(
            "OpenShift: run the driver only on nodes of this RHCOS build (NFD "
            "`system-os_release.OSTREE_VERSION`, e.g. `416.94.202410211619-0`); needs "
            "`driverToolkitImage`; the one-build form of `rhcosBuilds`"
        ),
    )
    rhcosBuilds: Annotated[
        list[RhcosBuild],
        Doc(
            type="list of `{rhcosVersion, driverToolkitImage}`", see="Driver and container runtime"
        ),
    ] = Field(
        default_factory=list,
        description=(
            "OpenShift: one driver DaemonSet per RHCOS build, each on the nodes of its build "
            "with that build's Driver Toolkit image (by digest), as the GPU Operator runs "
            "them; `gpustack driver-toolkit-builds` fills it from the cluster's "
            "`openshift/driver-toolkit` ImageStream"
        ),
    )

    upgrade: Annotated[DriverUpgrade, Doc(see="Driver upgrades")] = Field(
        default_factory=DriverUpgrade,
        description="how a driver change rolls over the GPU nodes (driver container modes)",
    )
    manager: DriverManager = Field(default_factory=DriverManager)

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.precompiled and not self.kernelVersion and not self.kernelVersions:
            raise ConflictError(
                ("driver", "kernelVersion"),
                "driver.precompiled needs driver.kernelVersion (the GPU nodes' `uname -r`), or "
                "driver.kernelVersions for several: NVIDIA publishes one precompiled image per "
                "kernel",
            )
        if self.kernelVersions and self.kernelVersion:
            raise ConflictError(
                ("driver", "kernelVersion"),
                "driver.kernelVersions lists every kernel that gets a driver DaemonSet: drop "
                "driver.kernelVersion (the one-kernel form)",
            )
        if self.kernelVersions and not self.precompiled:
            raise ConflictError(
                ("driver", "kernelVersions"),
                "driver.kernelVersions picks the precompiled image of each kernel, and the "
                "driver is built on each node for its own kernel: it would change nothing; set "
                "driver.precompiled: true, or drop driver.kernelVersions",
            )
        for index, kernel in enumerate(self.kernelVersions):
            if kernel in self.kernelVersions[:index]:
                raise ConflictError(
                    ("driver", "kernelVersions", index),
                    f"kernel {kernel} is listed twice in driver.kernelVersions: one driver "
                    "DaemonSet per kernel",
                )
        if self.precompiled and not self.nodeOS.startswith("ubuntu"):
            raise ConflictError(
                ("driver", "precompiled"),
                "NVIDIA publishes precompiled driver images for Ubuntu only; set "
                "driver.precompiled: false",
            )
        if self.rhcosBuilds and (self.rhcosVersion or self.driverToolkitImage):
            raise ConflictError(
                ("driver", "rhcosVersion" if self.rhcosVersion else "driverToolkitImage"),
                "driver.rhcosBuilds names each RHCOS build's Driver Toolkit image: drop "
                "driver.rhcosVersion and driver.driverToolkitImage (the one-build form)",
            )
        seen: set[str] = set()
        for index, build in enumerate(self.rhcosBuilds):
            if build.rhcosVersion in seen:
                raise ConflictError(
                    ("driver", "rhcosBuilds", index, "rhcosVersion"),
                    f"RHCOS build {build.rhcosVersion} is listed twice in driver.rhcosBuilds: "
                    "one driver DaemonSet per build",
                )
            seen.add(build.rhcosVersion)
        if self.rhcosVersion and not self.driverToolkitImage:
            raise ConflictError(
                ("driver", "driverToolkitImage"),
                "driver.rhcosVersion needs driver.driverToolkitImage, the Driver Toolkit image of "
                "that RHCOS build (`oc adm release info --image-for=driver-toolkit`)",
            )
        return self
