"""The checks of the driver and what reaches it: the OS a driver container is built for (an AKS
pool's OS SKU, an OpenShift release's RHCOS), the NVIDIA Container Toolkit that points the runtime
at it, the Driver Toolkit builds on OpenShift, and NVIDIA's validator, which every GPU DaemonSet
waits on, with the node status exporter that reports it; and the driver manager's drain, which
must name the pods it drains."""

from __future__ import annotations

from gpustack.errors import UserError
from gpustack.resolve.checks.context import CheckContext
from gpustack.resolve.layered_settings import nearest
from gpustack.resolve.stack import (
    DRIVER_CONTAINER_ROOT,
    driver_os_tag,
    kubernetes_minor,
    validator_finds_driver,
)


def check_os_sku(context: CheckContext) -> None:
    """A driver container on a platform whose pools are made from OS SKUs (AKS): the image is
    built for driver.nodeOS, so some pool OS must run it."""
    config, profile = context.config, context.profile
    skus = profile.facts.driver.osSkus
    if not skus or not context.stack.driver_container:
        return
    if config.driver.nodeOS not in skus:
        raise UserError(
            f"profile {profile.metadata.name!r} has no node pool OS that runs "
            f"{config.driver.nodeOS}, which the driver container is built for",
            context.at(("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"one of {', '.join(skus)}",
        )
    offered = profile.facts.driver.osSkuKubernetesVersions.get(config.driver.nodeOS)
    version = kubernetes_minor(config.platform.kubernetesVersion)
    if offered and not (
        kubernetes_minor(offered.first) <= version <= kubernetes_minor(offered.last)
    ):
        others = [
            node_os
            for node_os, span in profile.facts.driver.osSkuKubernetesVersions.items()
            if node_os in skus
            and kubernetes_minor(span.first) <= version <= kubernetes_minor(span.last)
        ]
        raise UserError(
            f"profile {profile.metadata.name!r} offers the node pool OS SKU "
            f"{skus[config.driver.nodeOS]} of {config.driver.nodeOS} for Kubernetes "
            f"{offered.first} to {offered.last}, not {config.platform.kubernetesVersion}: "
            "the pool command would be refused",
            context.at(("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"driver.nodeOS: {' or '.join(others)}"
            if others
            else "a platform.kubernetesVersion the OS SKU is offered for",
        )


def check_platform_os(context: CheckContext) -> None:
    """A driver container on a platform whose node OS follows its version (OpenShift): the
    version must be one the profile knows, and NVIDIA must publish the driver for that OS."""
    config, stack, name = context.config, context.stack, context.name
    facts = context.facts.driver
    if not facts.nodeOS or not stack.driver_container:
        return
    version = config.platform.openshiftVersion
    known = sorted(facts.nodeOS, key=lambda v: tuple(int(part) for part in v.split(".")))
    if version not in facts.nodeOS:
        raise UserError(
            f"profile {name!r} does not know the node OS of OpenShift {version}, which picks the "
            "driver image"
            if version
            else f"the driver image on profile {name!r} follows platform.openshiftVersion",
            context.at(("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"one of {known[0]} to {known[-1]}; for another release, a profile of your own "
            f"that extends {name!r} with its facts.driver.nodeOS (`cat /etc/os-release` on a "
            "node: ID and VERSION_ID)",
        )
    published = facts.publishedImages
    tag = driver_os_tag(stack.node_os)
    driver = config.driver.version
    if published and driver in published.drivers and tag not in published.osTags:
        served = [v for v in known if driver_os_tag(facts.nodeOS[v]) in published.osTags]
        upgrade = f"upgrade to OpenShift {served[0]} or later, " if served else ""
        raise UserError(
            f"NVIDIA publishes no driver {driver} image for OpenShift {version} "
            f"(nvcr.io/nvidia/driver:{driver}-{tag}): its tags for this platform are "
            f"{', '.join(published.osTags)}"
            + (f" (OpenShift {served[0]} to {served[-1]})" if served else ""),
            context.at(("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"{upgrade}set driver.version to a driver whose NGC nvidia/driver tags include "
            f"-{tag}, or install the driver on the nodes (driver.mode: preinstalled)",
        )


def check_toolkit(context: CheckContext) -> None:
    """The toolkit a driver container needs, and what the driver mode makes of the Driver
    Toolkit's settings."""
    config, facts, name, stack = context.config, context.facts, context.name, context.stack
    if config.toolkit.enabled is True and facts.runtime.toolkit is None:
        shipped = (
            f": {facts.driver.nodeImage} ships it and configures the runtime"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"gpustack does not deploy the NVIDIA Container Toolkit on profile {name!r}{shipped}",
            context.at(("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled: auto",
        )
    if stack.driver_container and not stack.toolkit_enabled:
        raise UserError(
            "a driver container needs the NVIDIA Container Toolkit DaemonSet: only it points the "
            f"container runtime at the driver in {DRIVER_CONTAINER_ROOT}",
            context.at(("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled to auto or true",
        )
    if (
        facts.runtime.providedHandlers
        and facts.runtime.toolkit is not None
        and stack.toolkit_enabled
        and not stack.runtime_class_enabled
    ):
        # k3s (and RKE2, which runs k3s' agent) adds the nvidia runtimes it finds when it
        # starts, and refuses to start at all while its `default-runtime` names one it did not
        # find (k3s-io/k3s pkg/agent/containerd/config_linux.go SetupContainerdConfig: "default
        # runtime %s was not found"). The toolkit DaemonSet installs the runtime only once the
        # node runs pods: with `default-runtime: nvidia` in its agent config the node would
        # never start, and without it GPU pods naming no RuntimeClass run under runc.
        raise UserError(
            f"on profile {name!r} the toolkit DaemonSet's nvidia runtime can't be containerd's "
            "default: the node's agent refuses to start while its `default-runtime` names a "
            "runtime it has not found, and that runtime exists only once the toolkit's pod has "
            "run on the node, so GPU pods need the RuntimeClass",
            context.at(("runtimeClass", "enabled")),
            field="runtimeClass.enabled",
            hint="set runtimeClass.enabled: auto; or install the NVIDIA Container Toolkit on "
            "the hosts before the agent starts (driver.mode: preinstalled), and node/ makes "
            "nvidia the default runtime",
        )
    if config.driver.rhcosBuilds and stack.driver_mode != "driver-toolkit":
        raise UserError(
            f"driver.rhcosBuilds is for driver.mode driver-toolkit (OpenShift); the driver mode "
            f"here is {stack.driver_mode}, which would ignore it",
            context.at(("driver", "rhcosBuilds")),
            field="driver.rhcosBuilds",
            hint="remove driver.rhcosBuilds, or set driver.mode: driver-toolkit",
        )
    if (config.driver.rhcosBuilds or config.driver.rhcosVersion) and config.nfd.mode == "disabled":
        field = "rhcosBuilds" if config.driver.rhcosBuilds else "rhcosVersion"
        raise UserError(
            "a driver DaemonSet per RHCOS build selects its nodes by NFD's "
            "system-os_release.OSTREE_VERSION label, which nothing sets with nfd.mode disabled",
            context.at(("driver", field)),
            field=f"driver.{field}",
            hint="set nfd.mode to deploy or external (OpenShift: the NFD operator)",
        )
    pinned = config.driver.driverToolkitImage or config.driver.rhcosBuilds
    if stack.driver_mode == "driver-toolkit" and not pinned:
        if not facts.driver.driverToolkitImage:
            raise UserError(
                f"profile {name!r} names no default Driver Toolkit image",
                context.at(("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.rhcosBuilds (or driver.driverToolkitImage)",
            )
        version = config.platform.openshiftVersion or ""
        if version and tuple(int(part) for part in version.split(".")) < (4, 13):
            raise UserError(
                f"OpenShift {version}: the default Driver Toolkit image is RHEL 9 based (4.13 and "
                "later); earlier releases need the cluster's own",
                context.at(("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.driverToolkitImage to `oc adm release info "
                "--image-for=driver-toolkit`",
            )


def check_validator(context: CheckContext) -> None:
    """The validator stays where it finds the driver, and is refused where it cannot."""
    config, profile, layers = context.config, context.profile, context.layers
    path = ("validator", "enabled")
    defaults = profile.defaults.get("validator")
    # A profile whose nodes the validator cannot serve says so (eks-bottlerocket: the OS runs
    # the driver and device plugin as host services).
    profile_off = isinstance(defaults, dict) and defaults.get("enabled") is False
    if (
        config.validator.enabled is False
        and context.set_by_user(path)
        and not profile_off
        and validator_finds_driver(config, profile)
    ):
        # The GPU Operator has no switch for its validator (api/nvidia/v1/clusterpolicy_types.go
        # ValidatorSpec, v26.7.0): it is what every GPU DaemonSet waits on, and its driver
        # validation is what creates the /dev/char symlinks where no toolkit DaemonSet does.
        lost = []
        if not context.stack.toolkit_enabled and config.nodes.cgroupDriver == "systemd":
            lost.append(
                "the /dev/char symlinks of NVIDIA's device nodes, which nothing else here "
                "creates (with the systemd cgroup driver running GPU pods lose their GPUs at the "
                "next systemctl daemon-reload)"
            )
        lost.append(
            "the wait of the device plugin, GFD, the DCGM exporter and the MIG manager for the "
            "driver and the runtime (after every reboot and driver upgrade they would start "
            "first and crash-loop into minutes of back-off, advertising nothing meanwhile)"
        )
        raise UserError(
            "turning the validator off would remove " + " and ".join(lost) + "; NVIDIA's GPU "
            "Operator has no switch for its validator",
            nearest(layers[1:], path),
            field="validator.enabled",
            hint="remove it (auto deploys the validator here); validator.cudaWorkload: false "
            "skips its CUDA pod",
        )
    if config.validator.enabled is True and not validator_finds_driver(config, profile):
        raise UserError(
            f"NVIDIA's validator cannot validate the driver on profile "
            f"{profile.metadata.name!r}: it finds a driver on the host's root or in a driver "
            f"container ({DRIVER_CONTAINER_ROOT}) only, and its runtime validation needs an "
            "nvidia runtime",
            context.at(("validator", "enabled")),
            field="validator.enabled",
            hint="set validator.enabled: auto",
        )


def check_node_status_exporter(context: CheckContext) -> None:
    """The exporter reports the validator's ready files: without the validator every node would
    read as failing. A profile's default (the first layer) gives way silently; the user's own
    setting is refused."""
    path = ("nodeStatusExporter", "enabled")
    if not context.config.nodeStatusExporter.enabled or not context.set_by_user(path):
        return
    if not context.stack.validator_enabled:
        raise UserError(
            "nodeStatusExporter.enabled needs NVIDIA's validator, whose ready files it reports; "
            f"the validator is off here (profile {context.name!r})",
            nearest(context.layers[1:], path),
            field="nodeStatusExporter.enabled",
            hint="set nodeStatusExporter.enabled: false, or validator.enabled: true where the "
            "validator finds the driver",
        )


def check_drain(context: CheckContext) -> None:
    """k8s-driver-manager's drain without a pod selector can never succeed: refused where
    `driver.upgrade.drain.enabled` is written, so the user either names the pods to drain or
    leaves the drain off."""
    drain = context.config.driver.upgrade.drain
    # A driver the nodes or the platform install has no driver manager: the no-effect check
    # says so for every driver.* setting.
    if not drain.enabled or drain.podSelector.strip() or not context.stack.driver_container:
        return
    # k8s-driver-manager (NVIDIA/k8s-driver-manager v0.12.0, internal/kubernetes/client.go
    # DrainNode) drains through kubectl's drain package without IgnoreAllDaemonSets, passing
    # DRAIN_POD_SELECTOR_LABEL only when it is not empty; an empty selector lists every pod of
    # the node (k8s.io/kubectl v0.36.3, its vendored copy: pkg/drain/drain.go GetPodsForDeletion),
    # and daemonSetFilter (pkg/drain/filters.go) fails the whole drain, evicting nothing, at the
    # first running DaemonSet pod, whatever DRAIN_USE_FORCE says. The driver pod, whose init
    # container the manager is, is one. The GPU Operator's own upgrade controller drains with
    # IgnoreAllDaemonSets (NVIDIA/k8s-operator-libs pkg/upgrade/drain_manager.go), which
    # gpustack, rolling the DaemonSet instead, does not run.
    evicts = context.config.driver.upgrade.gpuPodEviction
    off = (
        "or leave the drain off: driver.upgrade.gpuPodEviction still evicts the GPU pods"
        if evicts
        else "or leave the drain off and free the GPU pods yourself before a driver change: "
        "with driver.upgrade.gpuPodEviction off nothing evicts them"
    )
    raise UserError(
        "driver.upgrade.drain without a podSelector can never succeed: k8s-driver-manager "
        "drains every pod of the node without setting DaemonSet pods aside, so the drain stops "
        "at the driver pod itself and evicts nothing",
        context.at(("driver", "upgrade", "drain", "enabled")),
        field="driver.upgrade.drain.enabled",
        hint="set driver.upgrade.drain.podSelector to a label selector that matches the GPU "
        f"workloads' pods and no DaemonSet's, {off}",
    )
