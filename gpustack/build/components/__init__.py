"""One module per component; each turns a resolved Stack into Kubernetes objects.

A component's `build(stack)` returns plain dicts and leaves labels common to all objects, apply
order, hashes and file names to `gpustack.build.decorate`. Adding a component is adding a module here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpustack.build.components import (
    alerts,
    dashboard,
    dcgm_exporter,
    device_plugin,
    dra_driver,
    driver,
    gfd,
    gke,
    mig_manager,
    namespace,
    nfd,
    node_status_exporter,
    openshift,
    runtime_class,
    smoke_test,
    toolkit,
    validator,
)
from gpustack.build.workload import select_on_deploy_labels
from gpustack.resolve.stack import Stack

Builder = Callable[[Stack], list[dict[str, Any]]]

COMPONENTS: tuple[Builder, ...] = (
    namespace.build,
    runtime_class.build,
    nfd.build,
    driver.build,
    toolkit.build,
    validator.build,
    device_plugin.build,
    dra_driver.build,
    gfd.build,
    mig_manager.build,
    dcgm_exporter.build,
    node_status_exporter.build,
    dashboard.build,
    gke.build,
    openshift.build,
    smoke_test.build,
)


def build_all(stack: Stack) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for build in COMPONENTS:
        objects.extend(build(stack))
    # The alerts watch the GPU DaemonSets the components above rendered.
    objects.extend(alerts.build(stack, objects))
    # The driver manager and the MIG manager stop the GPU DaemonSets rendered here through their
    # deploy labels while they change the driver or the GPUs' partitions.
    return select_on_deploy_labels(stack, objects)
