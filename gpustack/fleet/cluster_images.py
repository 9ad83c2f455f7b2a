"""Every image a rendered cluster (or fleet) runs, and the lists that registry tools read.

    collect(renderings) -> every image, once, sorted: as the nodes pull it, where a mirror copies
                           it from, and who runs it (`gpustack images`)
    as_text, as_pairs, as_skopeo_sync, as_oc_mirror, as_json, as_cyclonedx -> its formats
    lock_entries(saved, images) -> the lock entries saved digests give (`--lock-from`)
    unlocked(rendering) -> a finding per image without a digest, when images.requireDigests

An image is found where the cluster's nodes pull it: each container and init container of each
pod the rendering holds (workloads, Jobs, bare Pods), and each image a component starts pods
from at run time, which it names in its environment (RUNTIME_IMAGES); the driver manager
starts none (it evicts, drains and unloads: NVIDIA/k8s-driver-manager cmd/driver-manager,
v0.12.0). The host-side files of
`node/` (kubeadm, containerd, RKE2, k3s, GKE, EKS and Bottlerocket settings) name no container
image: the node's own image and packages install what they set up.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpustack import __version__, emit
from gpustack.build.decorate import COMPONENT_LABEL
from gpustack.build.pipeline import Rendering
from gpustack.errors import Location, UserError
from gpustack.findings import Finding
from gpustack.objects import describe, identity, labels_of, name_of
from gpustack.resolve.image_lock import LOCK_FILE, Reference, Saved, parse
from gpustack.validation.lint._objects import Objects, Pod, mapping, sequence

# Environment variables in which a component names the image it starts pods from itself.
RUNTIME_IMAGES = frozenset(
    {
        # The validator's CUDA and device plugin workload pods (NVIDIA/gpu-operator
        # cmd/nvidia-validator/main.go validatorImageEnvName, v26.7.0).
        "VALIDATOR_IMAGE",
        # The DRA driver's IMEX and MPS daemons, which its controller and kubelet plugin start
        # (kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu
        # templates, IMAGE_NAME, v0.4.1).
        "IMAGE_NAME",
    }
)
CONTAINER_KEYS = ("initContainers", "containers", "ephemeralContainers")
PULL_NEVER = "Never"


@dataclass(frozen=True)
class Use:
    """Where a cluster runs an image: the component, the object and container, and how
    (`containers`, `initContainers`, or `env NAME`: started at run time by that container)."""

    cluster: str
    component: str
    object: str
    container: str
    way: str

    def as_dict(self) -> dict[str, str]:
        return {
            "cluster": self.cluster,
            "component": self.component,
            "object": self.object,
            "container": self.container,
            "as": self.way,
        }


@dataclass
class Image:
    """One image: `reference` as the nodes pull it, `source` the reference a mirror copies it
    from (the one the components wrote, before `images.registry` rewrote its host), whether any
    pod pulls it from a registry (not with `imagePullPolicy: Never` nor by a short name, which
    run what the node has), and its uses."""

    reference: str
    source: str
    pulled: bool = False
    uses: list[Use] = field(default_factory=list)

    @property
    def parts(self) -> Reference:
        found = parse(self.reference)
        return found if found is not None else Reference("", self.reference, None, None)

    @property
    def source_parts(self) -> Reference:
        found = parse(self.source)
        return found if found is not None else Reference("", self.source, None, None)

    @property
    def digest(self) -> str | None:
        return self.parts.digest

    @property
    def upstream(self) -> Reference:
        """The source with the digest the nodes pull it by (the lock's, once pinned)."""
        source = self.source_parts
        return replace(source, digest=source.digest or self.digest)

    @property
    def mirrored(self) -> bool:
        return self.source_parts.name != self.parts.name

    @property
    def components(self) -> list[str]:
        return sorted({use.component for use in self.uses})

    @property
    def clusters(self) -> list[str]:
        return sorted({use.cluster for use in self.uses})


def copied_from(reference: Reference) -> str:
    """The reference a copy reads: by digest when there is one (the registry tools refuse a tag
    and a digest together, containers/image docker/docker_transport.go), else by tag."""
    if reference.digest:
        return f"{reference.name}@{reference.digest}"
    return reference.tagged


def _uses(rendering: Rendering) -> Iterator[tuple[str, bool, Use, Pod, str]]:
    """(image, pulled, use, pod, field) for each image reference in the rendering's pods."""
    for pod in Objects(rendering.objects).pods():
        owner_labels = labels_of(pod.owner)
        component = str(
            pod.labels.get(COMPONENT_LABEL)
            or owner_labels.get(COMPONENT_LABEL)
            or name_of(pod.owner)
        )
        for key in CONTAINER_KEYS:
            for index, container in enumerate(map(mapping, sequence(pod.spec.get(key)))):
                image = container.get("image")
                if not isinstance(image, str):
                    continue
                name = str(container.get("name", ""))
                where = f"{pod.path}.{key}.{index}"
                pulled = container.get("imagePullPolicy") != PULL_NEVER and _has_registry(image)
                use = Use(rendering.name, component, describe(pod.owner), name, key)
                yield image, pulled, use, pod, f"{where}.image"
                for number, variable in enumerate(map(mapping, sequence(container.get("env")))):
                    variable_name, value = variable.get("name"), variable.get("value")
                    if variable_name in RUNTIME_IMAGES and isinstance(value, str) and parse(value):
                        started = Use(
                            rendering.name,
                            component,
                            describe(pod.owner),
                            name,
                            f"env {variable_name}",
                        )
                        yield value, True, started, pod, f"{where}.env.{number}.value"


def _has_registry(image: str) -> bool:
    """Whether `image` names its registry: a short name is the node's to resolve (GKE preloads
    its driver installers under such names), and neither `images.registry` nor a mirror list
    can move it (decorate.mirrored leaves it alone)."""
    parts = parse(image)
    return parts is not None and bool(parts.registry)


def collect(renderings: Sequence[Rendering]) -> list[Image]:
    """Every image the renderings' clusters run, once, sorted by reference."""
    found: dict[str, Image] = {}
    for rendering in renderings:
        for reference, pulled, use, _, _ in _uses(rendering):
            source = rendering.image_sources.get(reference, reference)
            image = found.get(reference)
            if image is None:
                image = found[reference] = Image(reference, source)
            elif image.source != source:
                if image.source == reference:
                    image.source = source  # the other cluster wrote the mirror's name itself
                elif source != reference:
                    raise UserError(
                        f"the mirror gives two images of the fleet one name: {image.source} "
                        f"and {source} are both pulled as {reference}",
                        Location(rendering.source),
                        field="images.registry",
                        hint="mirror the clashing images under different paths, e.g. a registry "
                        "of their own, or a patch that names the mirrored image",
                    )
            image.pulled = image.pulled or pulled
            if use not in image.uses:
                image.uses.append(use)
    for image in found.values():
        image.uses.sort(key=lambda use: (use.cluster, use.object, use.container, use.way))
    return [found[reference] for reference in sorted(found)]


def pulled(images: Sequence[Image]) -> list[Image]:
    return [image for image in images if image.pulled]


def as_text(images: Sequence[Image]) -> str:
    """One image a line, as the nodes pull it."""
    return "".join(f"{image.reference}\n" for image in pulled(images))


def as_pairs(images: Sequence[Image]) -> str:
    """`SOURCE MIRROR` a line: where each image is copied from (by digest when pinned) and the
    name the nodes pull it by (its tag, or its digest when it has none)."""
    lines = set()
    for image in pulled(images):
        if not image.mirrored:
            continue
        target = image.parts
        mirror = target.tagged if target.tag else copied_from(target)
        lines.add(f"{copied_from(image.upstream)} {mirror}\n")
    return "".join(sorted(lines))


def as_skopeo_sync(images: Sequence[Image]) -> str:
    """A `skopeo sync --src yaml` file (skopeo docs/skopeo-sync.1.md, "YAML file content"):
    each source registry's repositories and the tags or digests to copy. A pinned image is
    copied by its digest, which is what the pods pull; any other by its tag."""
    registries: dict[str, dict[str, set[str]]] = {}
    for image in pulled(images):
        source = image.upstream
        registry, _, repository = source.normalized.partition("/")
        wanted = source.digest or source.tag or "latest"
        registries.setdefault(registry, {}).setdefault(repository, set()).add(wanted)
    document = {
        registry: {
            "images": {
                repository: sorted(wanted) for repository, wanted in sorted(repositories.items())
            }
        }
        for registry, repositories in sorted(registries.items())
    }
    return (
        "# The images to copy into an air-gapped registry. On the connected side:\n"
        "#   skopeo sync --all --preserve-digests --scoped --src yaml --dest dir THIS-FILE DIR\n"
        "# then, inside, once per registry folder of DIR, into the mirror of images.registry:\n"
        "#   skopeo sync --all --preserve-digests --scoped --src dir --dest docker DIR/REGISTRY MIRROR\n"
        + emit.dump(document)
    )


# oc-mirror v2's image set configuration (openshift/oc-mirror
# v2/internal/pkg/api/v2alpha1/type_config.go, ImageSetConfiguration and Mirror.AdditionalImages).
OC_MIRROR_API_VERSION = "mirror.openshift.io/v2alpha1"


def as_oc_mirror(images: Sequence[Image]) -> str:
    """An oc-mirror v2 ImageSetConfiguration listing every image as an additional image."""
    names = sorted({copied_from(image.upstream) for image in pulled(images)})
    document = {
        "apiVersion": OC_MIRROR_API_VERSION,
        "kind": "ImageSetConfiguration",
        "mirror": {"additionalImages": [{"name": name} for name in names]},
    }
    return (
        "# oc-mirror --v2 --config THIS-FILE file://DIR, then inside:\n"
        "# oc-mirror --v2 --config THIS-FILE --from file://DIR docker://MIRROR\n"
        + emit.dump(document)
    )


def as_json(images: Sequence[Image]) -> str:
    listed = [
        {
            "image": image.reference,
            "source": image.source,
            "digest": image.digest,
            "pulled": image.pulled,
            "components": image.components,
            "clusters": image.clusters,
            "usedBy": [use.as_dict() for use in image.uses],
        }
        for image in images
    ]
    return json.dumps({"images": listed}, indent=2) + "\n"


# CycloneDX 1.6 (CycloneDX/specification schema/bom-1.6.schema.json).
CYCLONEDX_SPEC = "1.6"
PROPERTY = "gpustack:"


def as_cyclonedx(images: Sequence[Image], clusters: Sequence[str]) -> str:
    """A CycloneDX SBOM of the clusters' images: each a `container` component with its name,
    version (tag, or digest), digest as a SHA-256 hash and an OCI package URL where known, and
    properties naming the clusters and components that run it and the name it is pulled by.
    No timestamp, and a serial number made from the content: the same images, the same bytes."""
    components = [_component(image) for image in images]
    names = sorted(set(clusters))
    subject = {
        "type": "platform",
        "bom-ref": "gpustack:clusters",
        "name": names[0] if len(names) == 1 else f"{len(names)} clusters",
        "description": "the NVIDIA GPU stack rendered by gpustack",
        "properties": [{"name": f"{PROPERTY}cluster", "value": name} for name in names],
    }
    content = json.dumps([subject, components], sort_keys=True, separators=(",", ":"))
    document = {
        "$schema": f"http://cyclonedx.org/schema/bom-{CYCLONEDX_SPEC}.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": CYCLONEDX_SPEC,
        "serialNumber": uuid.uuid5(uuid.NAMESPACE_URL, f"gpustack:{content}").urn,
        "version": 1,
        "metadata": {
            "tools": {
                "components": [{"type": "application", "name": "gpustack", "version": __version__}]
            },
            "component": subject,
        },
        "components": components,
    }
    return json.dumps(document, indent=2) + "\n"


def _component(image: Image) -> dict[str, Any]:
    source = image.source_parts
    component: dict[str, Any] = {
        "type": "container",
        "bom-ref": image.reference,
        "name": source.name,
        "version": source.tag or image.digest or "latest",
    }
    digest = image.digest
    if digest:
        algorithm, _, hexadecimal = digest.partition(":")
        component["hashes"] = [{"alg": "SHA-256", "content": hexadecimal}]
        # package-url/purl-spec PURL-TYPES.rst "oci": the digest is the version, the repository
        # and tag are qualifiers.
        qualifiers = f"repository_url={source.normalized}" + (
            f"&tag={source.tag}" if source.tag else ""
        )
        last = source.repository.rsplit("/", 1)[-1]
        component["purl"] = f"pkg:oci/{last}@{algorithm}%3A{hexadecimal}?{qualifiers}"
    properties = [{"name": f"{PROPERTY}cluster", "value": name} for name in image.clusters]
    properties += [{"name": f"{PROPERTY}component", "value": name} for name in image.components]
    properties.append({"name": f"{PROPERTY}image", "value": image.reference})
    if not image.pulled:
        properties.append({"name": f"{PROPERTY}preloaded", "value": "true"})
    component["properties"] = properties
    return component


def lock_entries(saved: Sequence[Saved], images: Sequence[Image]) -> tuple[dict[str, str], int]:
    """The lock entries (image as the configs name it -> digest) that `saved` gives for
    `images`, and how many saved digests name none of them. A saved image is matched by its
    name as the configs write it or as the mirror serves it, tag included; a repository saved
    without a tag (`skopeo inspect`, `crane digest --full-ref`) matches the one tag of it the
    clusters pull."""
    exact: dict[str, str] = {}
    by_repository: dict[str, set[str]] = {}
    for image in pulled(images):
        source = image.source_parts
        if source.digest or not source.tag:
            continue  # pinned by the config itself; or untagged, which the lock cannot pin
        for name in {source.normalized, image.parts.normalized}:
            exact[f"{name}:{source.tag}"] = source.tagged
            by_repository.setdefault(name, set()).add(source.tagged)
    entries: dict[str, str] = {}
    unused = 0
    for each in saved:
        reference = each.reference
        if reference.tag:
            key = exact.get(f"{reference.normalized}:{reference.tag}")
        else:
            candidates = by_repository.get(reference.normalized, set())
            if len(candidates) > 1:
                raise UserError(
                    f"names a repository without a tag, and these clusters pull "
                    f"{len(candidates)} tags of it",
                    each.location,
                    hint="save one `IMAGE:TAG DIGEST` line per tag instead",
                )
            key = next(iter(candidates), None)
        if key is None:
            unused += 1
            continue
        if entries.get(key, each.digest) != each.digest:
            raise UserError(
                "gives another digest for an image that an earlier line or file gave one",
                each.location,
                hint="save each image once, from one inspection",
            )
        entries[key] = each.digest
    return entries, unused


def unlocked(rendering: Rendering) -> list[Finding]:
    """With images.requireDigests, an error for each image the cluster pulls without a digest."""
    if not rendering.require_digests:
        return []
    lock = rendering.lock_file.name if rendering.lock_file else LOCK_FILE
    found = []
    for image, pulled_, use, pod, where in _uses(rendering):
        parts = parse(image)
        if not pulled_ or (parts is not None and parts.digest):
            continue
        found.append(
            Finding(
                "image-not-locked",
                "error",
                f"{use.object} container {use.container!r}: image {image!r} ({use.way}) has "
                f"no digest, and images.requireDigests is set; save its digest with `skopeo "
                f"inspect` or `crane digest` and run `gpustack images CONFIG --lock-from FILE`, "
                f"which writes it into {lock}",
                object=identity(pod.owner),
                field=where,
            )
        )
    return found
