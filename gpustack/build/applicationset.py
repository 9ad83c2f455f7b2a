"""The fleet's Argo CD ApplicationSet: one for every cluster of a fleet, written to `_gitops/`.

    for_fleet(renderings) -> the fleet's one ApplicationSet, or None

Each config asks for it (gitops_objects.application_set builds it from the config's `gitops.argocd`);
its Git directory generator makes an Application of every rendered folder, so a fleet's configs
must agree on it: all or none, the same settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpustack.build.gitops_objects import with_namespace
from gpustack.build.pipeline import Rendering
from gpustack.errors import UserError
from gpustack.resolve.inventory import config_location


def for_fleet(renderings: Sequence[Rendering]) -> dict[str, Any] | None:
    """The fleet's one ApplicationSet, or None; refuses a fleet whose configs disagree on it (the
    Git directory generator makes an Application of every rendered folder, so it is all or none).
    """
    wanted = [rendering for rendering in renderings if rendering.application_set is not None]
    if not wanted:
        return None
    reference = wanted[0]
    for rendering in renderings:
        if rendering.application_set != reference.application_set:
            raise UserError(
                f"{reference.source} and {rendering.source} need the same gitops.argocd "
                "settings: their clusters share one ApplicationSet",
                config_location(rendering.source, ("gitops", "argocd")),
                field="gitops.argocd",
                hint="move the gitops section into the base config both extend",
            )
    # Each object names its namespace; the Applications' default is the stack's when the
    # fleet's clusters share one (profiles differ: OpenShift's is nvidia-gpu).
    namespaces = {rendering.namespace for rendering in wanted}
    application = reference.application_set
    if len(namespaces) == 1 and application is not None:
        return with_namespace(application, namespaces.pop())
    return application
