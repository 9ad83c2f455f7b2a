"""What every check of a config against its profile reads: the config, its profile, the layers
that wrote it (the profile's defaults first, then bases, the config file, `--set`) and the
`Stack` they make, built once for each pass of the checks (gpustack.resolve.profile_checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpustack.config.model import GPUStack
from gpustack.config.profile_model import Profile, ProfileFacts
from gpustack.errors import Location
from gpustack.resolve.layered_settings import Layer, nearest, set_by_user
from gpustack.resolve.stack import Stack


@dataclass(frozen=True)
class CheckContext:
    """One config checked against one profile. `stack` is the config resolved without the files
    it names (no PEM, no MIG configs read yet): what the checks derive (the driver mode, whether
    a component runs) is the same `Stack` property the components read."""

    config: GPUStack
    profile: Profile
    layers: list[Layer]
    stack: Stack = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stack", Stack(self.config, self.profile, ""))

    @property
    def name(self) -> str:
        """The profile's name, as messages quote it."""
        return self.profile.metadata.name

    @property
    def facts(self) -> ProfileFacts:
        return self.profile.facts

    def at(self, path: tuple[str | int, ...], *, key: bool = False) -> Location:
        """Where the layers write `path` (or the nearest setting above it): an error's place."""
        return nearest(self.layers, path, key)

    def set_by_user(self, path: tuple[str, ...]) -> bool:
        """Whether a layer above the profile's defaults writes `path`."""
        return set_by_user(self.layers, path)

    @property
    def own_layers(self) -> list[Layer]:
        """The layers the cluster writes itself (`own_layers`)."""
        return own_layers(self.layers)


def own_layers(layers: list[Layer]) -> list[Layer]:
    """The layers a cluster writes itself: its config file and what is above it (`--set`),
    not the bases it extends nor the profile's defaults (the first layer)."""
    files = [index for index, layer in enumerate(layers) if index and layer.path is not None]
    return layers[files[-1] :] if files else layers[1:]


def version_tuple(version: str) -> tuple[int, ...]:
    """`"570.158.01"` -> (570, 158, 1), for comparing dotted release numbers."""
    return tuple(int(part) for part in version.split("."))
