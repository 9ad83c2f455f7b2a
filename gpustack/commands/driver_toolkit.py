"""`gpustack driver-toolkit-builds FILE`: OpenShift's RHCOS builds and their Driver Toolkit
images, read from a saved `openshift/driver-toolkit` ImageStream, as `driver.rhcosBuilds`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import echo

app = common.application()


@app.command("driver-toolkit-builds")
def run(
    imagestream: Annotated[
        Path,
        typer.Argument(
            help="What `oc get imagestream driver-toolkit -n openshift -o yaml` printed, saved.",
            metavar="FILE",
            show_default=False,
        ),
    ],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Write the list into this config's driver.rhcosBuilds (comments kept, the "
            "one-build driver.rhcosVersion and driver.driverToolkitImage dropped) instead of "
            "printing it.",
            metavar="CONFIG",
        ),
    ] = None,
    debug: common.Debug = False,
) -> int:
    """Print driver.rhcosBuilds for the RHCOS builds of a saved driver-toolkit ImageStream."""
    from gpustack.errors import display_path
    from gpustack.resolve import rhcos_builds

    builds = rhcos_builds.read_builds(imagestream)
    count = f"{len(builds)} RHCOS build(s)"
    if config is None:
        echo(rhcos_builds.as_config(builds), nl=False)
        echo(f"{count} from {display_path(imagestream)}", err=True)
        return 0
    dropped = rhcos_builds.write_into_config(config, builds)
    note = f"; dropped {' and '.join(dropped)} (the one-build form)" if dropped else ""
    echo(f"wrote {count} into {display_path(config)} driver.rhcosBuilds{note}", err=True)
    return 0
