"""`gpustack images`: every image a cluster or fleet runs, in the formats registry tools read;
with `--lock-from`, the digests a user saved written into the image lock beside the configs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import configs as discover
from gpustack.commands.common import echo, warning

if TYPE_CHECKING:
    from gpustack.build.pipeline import Rendering


class ImageFormat(str, Enum):
    """`--output` of `gpustack images`."""

    text = "text"
    pairs = "pairs"
    skopeo_sync = "skopeo-sync"
    oc_mirror = "oc-mirror"
    json = "json"
    cyclonedx = "cyclonedx"


app = common.application()


@app.command("images")
def run(
    configs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Cluster configs or fleet folders (default ./gpustack.yaml, else the embedded "
            "kubeadm example).",
            metavar="CONFIG|DIR",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        ImageFormat,
        typer.Option(
            "--output",
            help="text (one image a line, as the nodes pull it), pairs (`SOURCE MIRROR` a line, "
            "with images.registry), skopeo-sync (a `skopeo sync --src yaml` file), oc-mirror (an "
            "ImageSetConfiguration), json, or cyclonedx (an SBOM).",
            metavar="FORMAT",
        ),
    ] = ImageFormat.text,
    lock_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--lock-from",
            help="A saved `skopeo inspect docker://IMAGE` (or several, one after another), or "
            "`IMAGE DIGEST` / `IMAGE@DIGEST` lines (`crane digest`): write the digests of the clusters' images into the lock "
            "file beside their configs (gpustack.lock) instead of listing them; repeatable.",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    profiles_dir: common.ProfilesDir = None,
    assignments: common.Assignments = None,
    quiet: common.Quiet = False,
    debug: common.Debug = False,
) -> int:
    """List every image the clusters run, or lock their digests (air-gapped and audited clusters)."""
    from gpustack.errors import Location, UserError
    from gpustack.fleet import cluster_images
    from gpustack.fleet import clusters as fleet
    from gpustack.resolve.load import overrides

    paths = discover(configs, quiet)
    renderings = fleet.render_all(paths, None, profiles_dir, override=overrides(assignments or []))
    if lock_from:
        return _lock(renderings, lock_from, quiet)
    images = cluster_images.collect(renderings)
    if output_format is ImageFormat.pairs and not any(image.mirrored for image in images):
        raise UserError(
            "pairs lists each image with the name its mirror serves, and no cluster sets "
            "images.registry",
            Location("--output"),
            hint="set images.registry, or list the images with --output text",
        )
    if output_format is ImageFormat.cyclonedx:
        text = cluster_images.as_cyclonedx(images, [r.name for r in renderings])
    else:
        text = {
            ImageFormat.text: cluster_images.as_text,
            ImageFormat.pairs: cluster_images.as_pairs,
            ImageFormat.skopeo_sync: cluster_images.as_skopeo_sync,
            ImageFormat.oc_mirror: cluster_images.as_oc_mirror,
            ImageFormat.json: cluster_images.as_json,
        }[output_format](images)
    echo(text, nl=False)
    return 0


def _lock(renderings: list[Rendering], saved_files: list[Path], quiet: bool) -> int:
    """Read every saved file, then write each lock file whose digests change: nothing is
    written when a saved file is refused."""
    from gpustack.errors import Location, UserError, display_path
    from gpustack.fleet import cluster_images
    from gpustack.resolve import image_lock

    saved = [entry for path in saved_files for entry in image_lock.read_saved(path)]
    by_lock: dict[Path, list[Rendering]] = {}
    for rendering in renderings:
        if rendering.lock_file is None:
            raise UserError(
                "the embedded example has no folder for an image lock",
                Location("--lock-from"),
                hint="name the cluster configs whose images to lock",
            )
        by_lock.setdefault(rendering.lock_file, []).append(rendering)
    planned = []
    for lock_file, group in by_lock.items():
        images = cluster_images.collect(group)
        entries, _ = cluster_images.lock_entries(saved, images)
        before = image_lock.read_lock(lock_file)
        after = {**before, **entries}
        added = sum(1 for key in entries if key not in before)
        changed = sum(1 for key, digest in entries.items() if before.get(key, digest) != digest)
        missing = sorted(
            {
                image.source
                for image in cluster_images.pulled(images)
                if not image.digest and image.source_parts.tag and image.source not in after
            }
        )
        planned.append((lock_file, before, after, added, changed, missing))
    _, unused = cluster_images.lock_entries(saved, cluster_images.collect(renderings))
    image_lock.write_locks(
        {lock_file: after for lock_file, before, after, *_ in planned if after != before}
    )
    for lock_file, _, _, added, changed, missing in planned:
        shown = display_path(lock_file)
        if not quiet:
            echo(f"{shown}: {added} digest(s) added, {changed} changed", err=True)
        if missing:
            named = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            warning(f"{shown}: {len(missing)} image(s) still have no digest: {named}")
    if unused:
        warning(f"{unused} saved digest(s) name no image of these clusters")
    return 0
