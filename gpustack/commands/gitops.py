"""`gpustack gitops plugin`: what Argo CD needs to run gpustack itself."""

from __future__ import annotations

from gpustack.commands.common import echo
from gpustack.commands.declared import Command, Group

# Where Argo CD's sidecar plugin server reads its configuration (argo-cd
# config-management-plugins docs: /home/argocd/cmp-server/config/plugin.yaml).
PLUGIN_HEADER = (
    "# Argo CD ConfigManagementPlugin: runs `gpustack render --stdout` in every folder holding a\n"
    "# gpustack.yaml. Mount it as /home/argocd/cmp-server/config/plugin.yaml in a repo-server\n"
    "# sidecar whose image has gpustack installed.\n"
)


def plugin() -> int:
    """Print Argo CD's ConfigManagementPlugin (plugin.yaml) that renders configs in Argo CD."""
    from gpustack import emit, gitops_objects

    echo(PLUGIN_HEADER + emit.dump(gitops_objects.plugin()), nl=False)
    return 0


COMMAND = Group(
    "Argo CD and Flux integration.",
    {"plugin": Command(plugin.__doc__ or "", plugin, ())},
)
