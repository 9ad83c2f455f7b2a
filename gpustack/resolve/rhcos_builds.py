"""OpenShift's Driver Toolkit ImageStream, read offline into `driver.rhcosBuilds`.

The cluster keeps one Driver Toolkit (DTK) image per RHCOS build in the ImageStream
`openshift/driver-toolkit`: the release payload's template (openshift/driver-toolkit
manifests/01-openshift-imagestream.yaml) has the tags `latest` and one for the release's RHCOS
build, which `oc adm release new` names after the build, and the tags of the builds still running
in the cluster stay (openshift/driver-toolkit docs/driver_toolkit_imagestream.md). Each tag is
`{name: <RHCOS build>, from: {kind: DockerImage, name: <image>@sha256:...}}` in `spec.tags`, and
its imported image is `status.tags[].items[].dockerImageReference`. The GPU Operator reads
`spec.tags`, skipping `latest` and tags without `from`, as RHCOS build -> image
(NVIDIA/gpu-operator controllers/object_controls.go ocpHasDriverToolkitImageStream, v26.7.0).

The file is what a user saved from `oc get imagestream driver-toolkit -n openshift -o yaml`:
untrusted input, read bounded through `yamlio`, and no error quotes its content.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from gpustack.config.commented import Field, config_text, edited
from gpustack.config.driver_settings import RhcosBuild
from gpustack.config.field_types import IMAGE_BY_DIGEST, RHCOS_BUILD
from gpustack.errors import Location, UserError, display_path
from gpustack.objects import kind_of
from gpustack.read.bounded import MAX_FILE_BYTES, decode, read_bounded
from gpustack.read.yamlio import Path_, load_all_text, load_text, read_text

NAME = "driver-toolkit"
API_GROUP = "image.openshift.io/"
# The tag that follows the release's newest build, not a build of its own.
LATEST = "latest"
# The one-build form that driver.rhcosBuilds replaces (both together are a config error).
SHORTHAND = ("rhcosVersion", "driverToolkitImage")
SAVE_HINT = "save it with `oc get imagestream driver-toolkit -n openshift -o yaml > FILE`"


def read_builds(path: Path) -> list[RhcosBuild]:
    """The RHCOS builds and their DTK images in a saved `driver-toolkit` ImageStream, in build
    order (a re-run after the ImageStream's tags moved about gives the same list)."""
    shown = display_path(path)
    text = decode(read_bounded(path, MAX_FILE_BYTES, "a saved ImageStream"), shown)
    documents = [each for each in load_all_text(text, shown) if each.data is not None]
    if len(documents) != 1:
        raise UserError(
            f"holds {len(documents)} YAML documents; expected the one ImageStream",
            documents[1].source.nearest(()) if documents else Location(shown),
            hint=SAVE_HINT,
        )
    source, data = documents[0].source, documents[0].data
    if (
        not isinstance(data, dict)
        or kind_of(data) != "ImageStream"
        or not str(data.get("apiVersion", "")).startswith(API_GROUP)
    ):
        raise UserError(
            "is not an ImageStream (apiVersion image.openshift.io/v1, kind ImageStream)",
            source.nearest(("kind",)),
            hint=SAVE_HINT,
        )
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("name") != NAME:
        raise UserError(
            f"is not the {NAME} ImageStream (metadata.name {NAME})",
            source.nearest(("metadata", "name")),
            field="metadata.name",
            hint=SAVE_HINT,
        )
    spec = data.get("spec")
    tags = spec.get("tags") if isinstance(spec, dict) else None
    if not isinstance(tags, list):
        raise UserError(
            "has no spec.tags list", source.nearest(("spec", "tags")), field="spec.tags"
        )
    imported = _imported(data.get("status"))
    builds: dict[str, RhcosBuild] = {}
    for index, tag in enumerate(tags):
        path_: Path_ = ("spec", "tags", index)
        field = f"spec.tags[{index}]"
        if not isinstance(tag, dict):
            raise UserError("a tag is not a mapping", source.nearest(path_), field=field)
        name = tag.get("name")
        if name == LATEST:
            continue
        if not isinstance(name, str) or not re.fullmatch(RHCOS_BUILD, name):
            raise UserError(
                "the tag's name is not an RHCOS build such as 9.6.20250916-0 (a tag without a "
                "name is the broken ImageStream of RHBZ#2015024: save it again after the "
                "cluster repaired it)",
                source.nearest((*path_, "name")),
                field=f"{field}.name",
            )
        if name in builds:
            raise UserError(
                "the tag's name is given to an earlier tag too: one image per RHCOS build",
                source.nearest((*path_, "name")),
                field=f"{field}.name",
            )
        image = _spec_image(tag.get("from")) or imported.get(name)
        if image is None:
            raise UserError(
                "the tag has no image by digest: neither `from` (kind DockerImage, name "
                "<image>@sha256:<digest>) nor an imported image in status.tags",
                source.nearest((*path_, "from")),
                field=f"{field}.from",
                hint=SAVE_HINT,
            )
        builds[name] = RhcosBuild(rhcosVersion=name, driverToolkitImage=image)
    if not builds:
        raise UserError(
            f"lists no RHCOS build, only `{LATEST}`",
            source.nearest(("spec", "tags")),
            field="spec.tags",
        )
    return sorted(builds.values(), key=lambda build: _build_order(build.rhcosVersion))


def _spec_image(reference: Any) -> str | None:
    if not isinstance(reference, dict) or kind_of(reference) != "DockerImage":
        return None
    name = reference.get("name")
    return name if isinstance(name, str) and re.fullmatch(IMAGE_BY_DIGEST, name) else None


def _imported(status: Any) -> dict[str, str]:
    """Each tag's newest imported image by digest (`status.tags[].items[0]`, newest first)."""
    found: dict[str, str] = {}
    tags = status.get("tags") if isinstance(status, dict) else None
    for tag in tags if isinstance(tags, list) else []:
        items = tag.get("items") if isinstance(tag, dict) else None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            continue
        reference = items[0].get("dockerImageReference")
        if isinstance(reference, str) and re.fullmatch(IMAGE_BY_DIGEST, reference):
            found.setdefault(str(tag.get("tag")), reference)
    return found


def _build_order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.split(r"[.-]", version))


def as_config(builds: list[RhcosBuild]) -> str:
    """The `driver.rhcosBuilds` section of a config, to print: as `write_into_config` writes it
    into a config, so that it can be pasted there."""
    return config_text([_field(builds)])


def _field(builds: list[RhcosBuild]) -> Field:
    return Field("driver.rhcosBuilds", [build.model_dump() for build in builds])


def write_into_config(path: Path, builds: list[RhcosBuild]) -> list[str]:
    """Set `driver.rhcosBuilds` in the config at `path`, keeping its comments and layout, and
    drop the one-build form; returns the fields dropped. The file is replaced in one step (a
    reader sees the old file or the new one, never half of one)."""
    shown = display_path(path)
    text = read_text(path)
    document = load_text(text, shown)
    if not isinstance(document.data, dict):
        raise UserError("is not a config: a YAML mapping was expected", Location(shown, 1, 1))
    driver = document.data.get("driver")
    if driver is not None and not isinstance(driver, dict):
        raise UserError(
            "driver is not a mapping", document.source.nearest(("driver",)), field="driver"
        )
    dropped = [f"driver.{key}" for key in SHORTHAND if key in (driver or {})]
    text = edited(text, [_field(builds)], [f"driver.{key}" for key in SHORTHAND])
    _replace(path, text)
    return dropped


def _replace(path: Path, text: str) -> None:
    """Write `text` over the file at `path` (a link's target) atomically, keeping its mode."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    descriptor, staged = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staged, mode)
        os.replace(staged, target)
    except OSError as error:
        Path(staged).unlink(missing_ok=True)
        raise UserError(
            f"cannot write the config: {error.strerror}", Location(display_path(path))
        ) from None
