"""Warnings about a cluster that its config shows, not its objects: what renders and would run,
but needs something of the cluster that gpustack cannot see (a platform's managed exporter turned
off, nodes of the z-stream a Driver Toolkit image was built for, a namespace that admits
privileged pods, a private repository). Each is a rule with an id, and its findings join the
lint findings of the rendering (`gpustack.fleet.clusters.check_all`), so `render` and `check`
print them in every format as they print lint's.

Lint rules (gpustack.validation.lint) read objects, which `validate` has without a config; these
read the `Stack`, which only a render has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpustack.build.components import driver, namespace
from gpustack.findings import Finding
from gpustack.resolve.stack import Stack


@dataclass(frozen=True)
class ConfigRule:
    """A warning about a rendered cluster: `check` returns its message, or None."""

    id: str
    description: str  # what it catches, for the docs
    check: Callable[[Stack], str | None]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _managed_dcgm_exporter(stack: Stack) -> str | None:
    managed_from = stack.facts.managedDCGMExporterFrom
    version = stack.config.platform.kubernetesVersion
    if (
        not managed_from
        or not stack.config.dcgmExporter.enabled
        or _release(version) < _release(managed_from)
    ):
        return None
    return (
        f"Kubernetes {version} on {stack.profile.metadata.name}: new clusters run the "
        "platform's managed DCGM exporter too; set dcgmExporter.enabled: false or turn the "
        "managed one off, so that one exporter runs per GPU node"
    )


def _driver_toolkit_z_stream(stack: Stack) -> str | None:
    pinned = stack.config.driver.driverToolkitImage or stack.config.driver.rhcosBuilds
    if stack.driver_mode != "driver-toolkit" or pinned:
        return None
    return (
        f"the driver is built with {driver.driver_toolkit_image(stack)}, whose kernel is the "
        f"newest OpenShift {stack.config.platform.openshiftVersion} z-stream's: on nodes of "
        "any other z-stream (an older one, or one the tag has moved past) the build fails; "
        "set driver.rhcosBuilds to the cluster's builds (`gpustack "
        "driver-toolkit-builds` reads them from `oc get imagestream driver-toolkit -n "
        "openshift -o yaml`)"
    )


def _platform_namespace(stack: Stack) -> str | None:
    if not namespace.platform_owned(stack):
        return None
    labels = " ".join(f"{k}={v}" for k, v in stack.facts.namespaceLabels.items())
    return (
        f"namespace {stack.namespace} is the platform's own, so gpustack writes no Namespace "
        "for it (a pruning GitOps tool would delete it): it must exist and admit privileged "
        "pods; check its pod-security.kubernetes.io labels and the API server's Pod Security "
        "defaults and exemptions" + (f", and that it carries {labels}" if labels else "")
    )


def _entitlement_in_output(stack: Stack) -> str | None:
    if stack.entitlement_pem is None:
        return None
    return (
        "entitlement is enabled: the rendered MachineConfigs carry the entitlement "
        "certificate in plain text (base64); commit them only to a private repository"
    )


RULES: tuple[ConfigRule, ...] = (
    ConfigRule(
        "managed-dcgm-exporter",
        "the platform runs a managed DCGM exporter on new clusters of this Kubernetes release "
        "(GKE from 1.32), beside the one gpustack renders",
        _managed_dcgm_exporter,
    ),
    ConfigRule(
        "driver-toolkit-z-stream",
        "the driver is built with the profile's default Driver Toolkit image, which fits only "
        "nodes of one OpenShift z-stream",
        _driver_toolkit_z_stream,
    ),
    ConfigRule(
        "platform-namespace",
        "the stack runs in a namespace Kubernetes or the platform owns, which gpustack does not "
        "write: its Pod Security labels are not gpustack's",
        _platform_namespace,
    ),
    ConfigRule(
        "entitlement-in-output",
        "the rendered MachineConfigs carry the entitlement certificate",
        _entitlement_in_output,
    ),
)


def findings(stack: Stack) -> list[Finding]:
    """A warning for each rule the rendered cluster meets, in the order of `RULES`."""
    found = []
    for rule in RULES:
        message = rule.check(stack)
        if message is not None:
            found.append(Finding(rule.id, "warning", message))
    return found
