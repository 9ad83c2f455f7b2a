"""`gpustack gitops plugin`: what Argo CD needs to run gpustack itself."""

from __future__ import annotations

import typer

from gpustack.commands.common import handles_user_errors

app = typer.Typer(help="Argo CD and Flux integration.", no_args_is_help=True)

# Where Argo CD's sidecar plugin server reads its configuration (argo-cd
# config-management-plugins docs: /home/argocd/cmp-server/config/plugin.yaml).
PLUGIN_HEADER = (
    "# Argo CD ConfigManagementPlugin: runs `gpustack render --stdout` in every folder holding a\n"
    "# gpustack.yaml. Mount it as /home/argocd/cmp-server/config/plugin.yaml in a repo-server\n"
    "# sidecar whose image has gpustack installed.\n"
)


@app.callback()
def _group() -> None:
    """Argo CD and Flux integration."""


@app.command("plugin")
@handles_user_errors
def plugin() -> None:
    """Print Argo CD's ConfigManagementPlugin (plugin.yaml) that renders configs in Argo CD."""
    from gpustack import emit, gitops

    typer.echo(PLUGIN_HEADER + emit.dump(gitops.plugin()), nl=False)
