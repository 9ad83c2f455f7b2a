"""One module per component; each turns a resolved Stack into Kubernetes objects.

A component's `build(stack)` returns plain dicts and leaves labels common to all objects, apply
order, hashes and file names to `gpustack.decorate`. Adding a component is adding a module here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpustack.components import (
    dcgm_exporter,
    device_plugin,
    driver,
    gfd,
    gke,
    mig_manager,
    namespace,
    nfd,
    openshift,
    runtime_class,
    smoke_test,
    toolkit,
    validator,
)
from gpustack.config import Stack

Builder = Callable[[Stack], list[dict[str, Any]]]

COMPONENTS: tuple[Builder, ...] = (
    namespace.build,
    runtime_class.build,
    nfd.build,
    driver.build,
    toolkit.build,
    validator.build,
    device_plugin.build,
    gfd.build,
    mig_manager.build,
    dcgm_exporter.build,
    gke.build,
    openshift.build,
    smoke_test.build,
)


def build_all(stack: Stack) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for build in COMPONENTS:
        objects.extend(build(stack))
    # The MIG manager stops the GPU DaemonSets rendered here while it repartitions a node.
    return mig_manager.pause_gpu_clients(stack, objects)
