"""A fleet's inventory: the cluster configs a command names, usually one folder of configs
sharing defaults through `extends:`.

    discover(paths) -> the configs to render (files as given; in folders, every GPUStack config
                       that no other config there extends)
    load_all(paths, profile, profiles_dir) -> one Stack per config, names checked unique
    check_unique_names(clusters) -> refuses two configs (name, file) that would render into the
                       same folder
    config_location(source, path) -> where a field is in a config file, for an error

A base is a config another config in the folder extends: it holds shared defaults and is not a
cluster itself. A command given no paths reads `./gpustack.yaml`, or the embedded example where
no cluster config lies around.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from gpustack.errors import Location, UserError, display_path, real_path
from gpustack.feedback import Say
from gpustack.read.bounded import MAX_FILE_BYTES, read_bounded
from gpustack.read.named_files import is_inside
from gpustack.resolve.load import bases, load_stack, read_document
from gpustack.resolve.stack import Stack

DEFAULT_CONFIG = Path("gpustack.yaml")
CONFIG_SUFFIXES = (".yaml", ".yml")


def discover(paths: Sequence[Path]) -> list[Path | None]:
    """The cluster configs that `paths` name, each once, in a stable order.

    No paths: `./gpustack.yaml` if present, else None (the embedded example), unless cluster
    configs lie around (a fleet repository): then naming them is required. A folder is searched
    recursively (skipping folders whose name starts with '.' or '_') for YAML files with
    `kind: GPUStack`; bases are left out, and every config's `extends:` chain is checked here, so a
    missing or cyclic base is reported before anything is rendered.
    """
    if not paths:
        if DEFAULT_CONFIG.is_file():
            return [DEFAULT_CONFIG]
        _refuse_configs_nearby()
        return [None]
    found: dict[Path, Path] = {}
    for path in paths:
        chosen = _folder_configs(path) if path.is_dir() else [path]
        for config in chosen:
            found.setdefault(real_path(config), config)
    return list(found.values())


# Where a fleet repository keeps its configs, by the convention docs/gitops.md shows, and how many files a
# bare command looks at there.
FLEET_FOLDER = Path("clusters")
_NEARBY_FILES = 2000


def _refuse_configs_nearby() -> None:
    """A bare command in a fleet repository (configs in the working folder itself or in
    `clusters/`) must not fall back to the embedded example."""
    found: dict[str, None] = {}
    nearby = sorted(path for path in Path(".").iterdir() if path.name.endswith(CONFIG_SUFFIXES))
    if FLEET_FOLDER.is_dir():
        nearby += yaml_files(FLEET_FOLDER)
    for path in nearby[:_NEARBY_FILES]:
        if not path.is_file() or not is_inside(Path("."), path):
            continue
        try:
            with path.open("rb") as handle:
                if b"GPUStack" not in handle.read(65536):
                    continue
        except OSError:
            continue
        try:
            looks = is_config(path)
        except UserError:
            looks = True  # a broken config is still a config
        if looks:
            top = path.parts[0]
            found[top if len(path.parts) == 1 else f"{top}/"] = None
    if found:
        shown = ", ".join(list(found)[:5]) + (", ..." if len(found) > 5 else "")
        raise UserError(
            f"no ./gpustack.yaml here, but there are cluster configs: {shown}",
            hint=f"name the configs or their folder, e.g. `{next(iter(found))}`; the embedded "
            "example is used only where no config is around",
        )


def _folder_configs(folder: Path) -> list[Path]:
    # A link out of the repository is left out unread, as `diff --git-ref` leaves it out of a
    # revision: a pull request's `clusters/x.yaml -> /etc/...` is no cluster of the fleet.
    configs = [path for path in yaml_files(folder) if is_inside(folder, path) and is_config(path)]
    if not configs:
        raise UserError(
            "no GPUStack configs in this folder",
            Location(display_path(folder)),
            hint="a config is a YAML file with 'kind: GPUStack'; `gpustack init` writes one",
        )
    extended = {base for config in configs for base in bases(config)}
    return [config for config in configs if real_path(config) not in extended]


def yaml_files(folder: Path) -> list[Path]:
    result: list[Path] = []
    for directory, subdirectories, names in os.walk(folder):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith((".", "_")))
        result.extend(Path(directory, name) for name in names if name.endswith(CONFIG_SUFFIXES))
    return sorted(result)


# What a cluster config looks like before it parses: its kind, or `extends:` at the top level.
LOOKS_LIKE_CONFIG = re.compile(rb"GPUStack|^extends[ \t]*:", re.MULTILINE)


def is_config(path: Path) -> bool:
    try:
        data = read_document(path).data
    except UserError as error:
        # Other YAML in the folder (manifests, templates) is not ours to judge, but a config
        # that does not parse is reported, not skipped; so is a file that cannot be read at all
        # (a broken link, a FIFO, a folder named *.yaml): no position, nothing parsed.
        if error.location is None or not error.location.line:
            raise
        if LOOKS_LIKE_CONFIG.search(read_bounded(path, MAX_FILE_BYTES)):
            raise
        return False
    # A per-cluster file may leave `kind` (and everything else) to the base it extends.
    if not isinstance(data, dict):
        return False
    kind = data.get("kind")
    ours = str(data.get("apiVersion", "")).startswith("gpustack.dev/")
    # A gpustack apiVersion with a kind that is no name at all is a broken config, not a stranger.
    return (
        kind == "GPUStack"
        or ("kind" not in data and "extends" in data)
        or (ours and not isinstance(kind, str))
    )


def load_all(
    paths: Sequence[Path], profile: str | None = None, profiles_dir: Path | None = None
) -> list[Stack]:
    """Every config `paths` name (see discover), loaded and validated; cluster names unique."""
    stacks = [load_stack(path, profile, profiles_dir) for path in discover(paths)]
    check_unique_names([(stack.name, stack.source) for stack in stacks])
    return stacks


def check_unique_names(clusters: Sequence[tuple[str, str]]) -> None:
    """Refuse two configs (name, config file) that would render into the same folder."""
    first: dict[str, str] = {}
    for name, source in clusters:
        if name in first:
            raise UserError(
                f"cluster name {name!r} is used by both {first[name]} and {source}",
                config_location(source, ("metadata", "name")),
                field="metadata.name",
                hint="each cluster needs its own metadata.name, which names its output folder",
            )
        first[name] = source


def config_location(source: str, path: tuple[str, ...]) -> Location | None:
    try:
        return read_document(Path(source)).source.nearest(path)
    except UserError:
        return Location(source)


EMBEDDED_EXAMPLE_NOTE = (
    "no ./gpustack.yaml here: using the embedded example (kubeadm, cluster kubeadm-lab); "
    "`gpustack init` writes a config of your own"
)


def discover_noted(paths: Sequence[Path], note: Say) -> list[Path | None]:
    """`discover`, saying so (`note`) when it is the embedded example."""
    found = discover(paths)
    if found == [None]:
        note(EMBEDDED_EXAMPLE_NOTE)
    return found
