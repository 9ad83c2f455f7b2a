"""image-not-pinned: an image without a tag, or tagged `latest`, changes under a byte-identical
manifest, so the Git history no longer says what runs."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Rule, finding, mapping, sequence


def tag(image: str) -> str | None:
    """The image's tag ('' for a digest reference, None when it has neither)."""
    if "@" in image:
        return ""
    name = image.rsplit("/", 1)[-1]
    return name.partition(":")[2] or None


def check(objects: Objects) -> Iterator[Finding]:
    for pod in objects.pods():
        for key in ("initContainers", "containers"):
            for index, container in enumerate(map(mapping, sequence(pod.spec.get(key)))):
                image = container.get("image")
                if not isinstance(image, str):
                    continue
                found = tag(image)
                if found is None or found == "latest":
                    what = (
                        "has no tag (so it means latest)" if found is None else "is tagged latest"
                    )
                    yield finding(
                        RULE,
                        pod.owner,
                        f"{describe(pod.owner)} container {container.get('name')!r}: "
                        f"image {image!r} "
                        f"{what}; pin a version tag or a digest (@sha256:...)",
                        f"{pod.path}.{key}.{index}.image",
                    )


RULE = Rule(
    "image-not-pinned",
    "error",
    "A container image has no tag or the tag `latest`.",
    "Pin a version tag or a digest (`@sha256:...`).",
    check,
)
