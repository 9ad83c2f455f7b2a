"""`gpustack gitops plugin`: what Argo CD needs to run gpustack itself."""

from __future__ import annotations

from gpustack.commands import common
from gpustack.commands.common import echo

# Where Argo CD's sidecar plugin server reads its configuration (argo-cd
# config-management-plugins docs: /home/argocd/cmp-server/config/plugin.yaml).
PLUGIN_HEADER = (
    "# Argo CD ConfigManagementPlugin: runs `gpustack render --stdout` in every folder holding a\n"
    "# gpustack.yaml. Mount it as /home/argocd/cmp-server/config/plugin.yaml in a repo-server\n"
    "# sidecar whose image has gpustack installed.\n"
)


app = common.application(help="Argo CD and Flux integration.")


@app.callback()
def group() -> None:
    """A group, though it has one command: more may join it, and a script names it in full."""


@app.command("plugin")
def plugin(debug: common.Debug = False) -> int:
    """Print Argo CD's ConfigManagementPlugin (plugin.yaml) that renders configs in Argo CD."""
    from gpustack import emit
    from gpustack.build import gitops_objects

    echo(PLUGIN_HEADER + emit.dump(gitops_objects.plugin()), nl=False)
    return 0
