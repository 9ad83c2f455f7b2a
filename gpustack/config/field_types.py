"""The config model's building blocks: the patterns and field types its sections share (names,
label keys, quantities, durations, host paths, image references), the base classes of every
section (`Strict`, `WithResources`), `Doc` for the config reference, and `ConflictError`, which
names the field two contradicting settings are reported at. The model knows nothing of files.
"""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
import posixpath
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

API_VERSION = "gpustack.dev/v1alpha1"

# RFC 1123 label: what a Namespace, a folder name and most object names must be.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# RFC 1123 subdomain: object names such as RuntimeClass handlers.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Kubernetes qualified name with optional DNS prefix: label and taint keys.
QUALIFIED_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# A Prometheus duration (units largest first, whole numbers): what ServiceMonitor and
# PodMonitoring accept for `interval` (prometheus/common model.ParseDuration).
DURATION = (
    r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$"
)

# A Kubernetes resource quantity, unsigned (k8s.io/apimachinery resource.Quantity): a decimal
# number with a binary (Ki..Ei), decimal (m, k, M..E) or exponent suffix.
QUANTITY = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]+)?$"
# An image registry to pull from instead of each image's own: a host (with a dot or a port, or
# `localhost`, else container runtimes read it as a Docker Hub namespace), an optional port and
# an optional path prefix of repository components (distribution/reference grammar).
_HOST = (
    r"(localhost|[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)+)"
)
_PATH_COMPONENT = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
# A TCP port, 1 to 65535.
_PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
REGISTRY = (
    rf"^({_HOST}(:{_PORT})?|[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?:{_PORT})(/{_PATH_COMPONENT})*$"
)
# A container image reference: name, optional tag, optional digest (pinning is lint's business).
IMAGE = (
    r"^[a-z0-9][-a-z0-9._/:]*[a-z0-9](:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(@sha256:[0-9a-f]{64})?$"
)
# The same, pinned by digest: an image that must be exactly one build's.
IMAGE_BY_DIGEST = (
    r"^[a-z0-9][-a-z0-9._/:]*[a-z0-9](:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?@sha256:[0-9a-f]{64}$"
)
# An RHCOS build as NFD labels it (system-os_release.OSTREE_VERSION) and as the cluster's
# `openshift/driver-toolkit` ImageStream names its tags: `416.94.202410211619-0` up to
# OpenShift 4.18, `9.6.20250916-0` from 4.19.
RHCOS_BUILD = r"^[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,14}-[0-9]{1,4}$"
# A kernel release as `uname -r` prints it on Ubuntu, e.g. 6.8.0-60-generic.
KERNEL_RELEASE = r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z0-9-]+$"
# An extended resource name with its domain, as a device plugin advertises it.
EXTENDED_RESOURCE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


@dataclass(frozen=True)
class Doc:
    """How the config reference (docs/config.md, written by gpustack.docs) shows a field where its annotation does not
    say it in words: `type` names the value ("DNS-1123 label"), `default` says what an unset
    field means, `see` names the section of docs/ that explains it. Pydantic ignores it, so it
    goes in `Annotated[...]`, on a field or on a type alias."""

    type: str | None = None
    default: str | None = None
    see: str | None = None


Name = Annotated[str, Field(pattern=DNS1123_LABEL, max_length=63), Doc(type="DNS-1123 label")]
LabelKey = Annotated[str, Field(pattern=QUALIFIED_KEY, max_length=316), Doc(type="label key")]
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63), Doc(type="label value")]
# An image tag that is a release version (the device plugin's, the toolkit's, MIG manager's).
# A few digits a part: no release has more, and the validator's release is compared as numbers.
ReleaseTag = Annotated[
    str, Field(pattern=r"^v[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$"), Doc(type="`vX.Y.Z`")
]

_DURATION_UNITS_MS = {
    "y": 365 * 86_400_000,
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
    "ms": 1,
}


def duration_ms(duration: str) -> int:
    """Milliseconds in a Prometheus duration that matches DURATION."""
    return sum(
        int(amount) * _DURATION_UNITS_MS[unit]
        for amount, unit in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", duration)
    )


# Prometheus keeps a duration as Go's time.Duration: int64 nanoseconds (prometheus/common model).
MAX_DURATION_MS = (2**63 - 1) // 1_000_000


def _absolute_path(path: str) -> str:
    if not path.startswith("/") or posixpath.normpath(path) != path:
        raise ValueError(f"{path!r} is not an absolute, normalized path (such as /var/lib/kubelet)")
    return path


# A path on the node (hostPath, driver root): absolute, with no '..', '.' or '//'.
HostPath = Annotated[str, AfterValidator(_absolute_path)]
# A Git repository URL as Argo CD takes it: a URL with a scheme, or scp-like git@host:path.
REPO_URL = r"^([a-z][a-z0-9+.-]*://[^\s/]+\S*|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+)$"


class Strict(BaseModel):
    """Unknown fields are errors: a misspelled field must never be silently ignored."""

    # strict: "true" is not a boolean and "4" not a number (YAML already types values).
    # defer_build: pydantic builds a model's validator when it first validates one, not when
    # the class is created: a run builds only the validators of the models it uses.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=False, strict=True, defer_build=True
    )


_QUANTITY_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def quantity_value(quantity: str) -> Decimal:
    """The amount a quantity matching QUANTITY stands for ('500m' -> 0.5, '1Gi' -> 1073741824)."""
    number, suffix = re.fullmatch(r"([0-9.]+)(.*)", quantity).groups()  # type: ignore[union-attr]
    if re.fullmatch(r"[eE][+-]?[0-9]+", suffix):  # an exponent; "E" and "Ei" are units
        return Decimal(number) * Decimal(10) ** int(suffix[1:])
    return Decimal(number) * _QUANTITY_SUFFIXES[suffix]


def _number_as_text(value: Any) -> Any:
    # YAML reads `cpu: 1` and `cpu: 0.5` as numbers; Kubernetes takes either, gpustack writes text.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_number_as_text),
    Field(pattern=QUANTITY, max_length=64),
    Doc(type="quantity"),
]
ResourceName = Annotated[
    str, Field(pattern=QUALIFIED_KEY, max_length=253), Doc(type="resource name")
]


class ResourceRequirements(Strict):
    """A container's `resources`, as in a pod spec."""

    requests: Annotated[dict[ResourceName, Quantity], Doc(default="none")] = Field(
        default_factory=dict,
        description="requests of the container: what the scheduler reserves, e.g. `cpu: 50m`",
    )
    limits: Annotated[dict[ResourceName, Quantity], Doc(default="none")] = Field(
        default_factory=dict,
        description="limits of the container: the most it may use, e.g. `memory: 512Mi`; each "
        "request at most its limit",
    )

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Self:
        # The API server refuses a request above its limit (ValidateResourceRequirements).
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if limit is not None and quantity_value(request) > quantity_value(limit):
                raise ValueError(f"requests.{name} {request} is more than limits.{name} {limit}")
        return self

    def as_pod_spec(self) -> dict[str, dict[str, str]]:
        return {
            field: dict(values)
            for field, values in (("requests", self.requests), ("limits", self.limits))
            if values
        }


class WithResources(Strict):
    """A component's config section with `resources` for its main container (the first container
    of each of its workloads). `components` names those workloads by their
    `app.kubernetes.io/component` label; decorate applies the requirements, so a new component
    gets the setting by deriving from this class."""

    components: ClassVar[tuple[str, ...]] = ()
    # The config reference: the main container ("the plugin container"), and gpustack's own
    # requirements for it (what the component module sets when `resources` is unset).
    container: ClassVar[str] = ""
    resource_defaults: ClassVar[dict[str, str]] = {}
    resources: Annotated[ResourceRequirements | None, Doc(see="Resources")] = Field(
        default=None,
        description="requests and limits of the container; given, they replace gpustack's own "
        "for it as a whole",
    )


class ConflictError(ValueError):
    """Two settings contradict each other; `path` names the field to point the user at."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def dns_label(value: str) -> bool:
    return bool(re.match(DNS1123_LABEL, value)) and len(value) <= 63
