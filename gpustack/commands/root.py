"""The `gpustack` command: the root's own options and every command by its module
(`gpustack/commands/<name>.py`, each declaring its COMMAND), which `declared.main` parses with
argparse, loading only the module of the command a run names."""

from __future__ import annotations

from gpustack.commands import common
from gpustack.commands.declared import DEBUG, Group, Option


def _version() -> None:
    from gpustack import __version__

    common.echo(f"gpustack {__version__}")


ROOT = Group(
    "Render, validate and diff the NVIDIA GPU stack for Kubernetes, per platform profile.",
    {
        "render": "gpustack.commands.render",
        "init": "gpustack.commands.init",
        "config": "gpustack.commands.config",
        "profiles": "gpustack.commands.profiles",
        "schema": "gpustack.commands.schema",
        "validate": "gpustack.commands.validate",
        "check": "gpustack.commands.check",
        "driver-toolkit-builds": "gpustack.commands.driver_toolkit",
        "diff": "gpustack.commands.diff",
        "images": "gpustack.commands.images",
        "import": "gpustack.commands.import_",
        "gitops": "gpustack.commands.gitops",
        "completion": "gpustack.commands.completion",
    },
    (
        DEBUG,
        Option("version", ("--version",), "Print the version and exit.", eager=_version),
        # A command's own --profiles-dir (or $GPUSTACK_PROFILES_DIR) still wins.
        common.PROFILES_DIR,
    ),
)
