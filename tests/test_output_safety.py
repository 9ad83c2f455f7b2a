"""Nothing lost, nothing leaked, nothing hangs: writing output under adversity.

A render killed at any point leaves each cluster folder entirely old or entirely new; a failure
during the write changes nothing; only the outputs of the configs rendered are pruned, and only
files gpustack wrote; two renders into one folder do not interleave.

Tests run as root here, where a read-only mode does not stop a write: a failing disk is simulated
in-process (monkeypatching the one system call that fails).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import random
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest
import render_process
from conftest import ROOT, run_gpustack

from gpustack.layout import HEADER
from gpustack.write import folders as output

CONFIG = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
BASE = (
    CONFIG + 'platform:\n  profile: kubeadm\n  kubernetesVersion: "1.31"\nnamespace: {namespace}\n'
)


def make_fleet(folder: Path, clusters: int, namespace: str = "gpu-old") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(BASE.format(namespace=namespace))
    for index in range(clusters):
        (folder / f"c{index:02}.yaml").write_text(
            f"{CONFIG}extends: base.yaml\nmetadata:\n  name: c{index:02}\n"
        )
    return folder


def gpustack(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """In-process (conftest.run_gpustack); the kill -9 test starts its own processes."""
    return run_gpustack(*args, cwd=cwd)


def gpustack_process(*args: object) -> BaseProcess:
    """`gpustack ARGS...` in a process of its own (its own session, so killpg reaches it), forked
    from a server with gpustack already imported (render_process)."""
    return render_process.start(*args, cwd=ROOT)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` (links as their target text), by relative path."""
    result = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            result[str(path.relative_to(folder))] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            result[str(path.relative_to(folder))] = path.read_bytes()
    return result


def folders(out: Path) -> dict[str, dict[str, bytes]]:
    return {path.name: tree(path) for path in sorted(out.iterdir()) if path.is_dir()}


# --- 1. old or new, never a mix --------------------------------------------------------------


# What changes a folder's listing (inotify(7), <sys/inotify.h>): an entry created, deleted or
# renamed in it, or the folder itself deleted or renamed (swapped away).
_IN_CHANGED = 0x100 | 0x200 | 0x40 | 0x80 | 0x400 | 0x800  # CREATE DELETE MOVED_FROM/TO *_SELF
_IN_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000


@contextlib.contextmanager
def _changes(out: Path) -> Iterator[int]:
    """A descriptor that turns readable once the listing of `out` or of a folder in it changes
    (something new appears in the output folder or in a cluster folder: the writing started).
    Watched before the render starts, so no change is missed, and waited for with select, so
    the test takes no CPU from the render it waits for."""
    libc = ctypes.CDLL(None, use_errno=True)
    descriptor = libc.inotify_init1(_IN_NONBLOCK_CLOEXEC)
    assert descriptor >= 0, os.strerror(ctypes.get_errno())
    try:
        for folder in [out, *(path for path in out.iterdir() if path.is_dir())]:
            watch = libc.inotify_add_watch(descriptor, os.fsencode(folder), _IN_CHANGED)
            assert watch >= 0, (folder, os.strerror(ctypes.get_errno()))
        yield descriptor
    finally:
        os.close(descriptor)


def test_a_killed_fleet_render_leaves_every_folder_entirely_old_or_entirely_new(tmp_path):
    # 12 clusters: staging and swapping 12 folders still takes long enough that most kills below
    # land inside the writing (staging leftovers show it); more clusters only made every render,
    # copy and comparison of the 8 attempts longer without adding kill points.
    clusters = 12
    fleet = make_fleet(tmp_path / "fleet", clusters)
    pristine = tmp_path / "pristine"
    assert gpustack("render", fleet, "-o", pristine).returncode == 0
    for name in os.listdir(pristine):
        (pristine / name / "NOTES.md").write_text(f"notes about {name}\n")  # the user's own
    old = folders(pristine)
    make_fleet(fleet, clusters, namespace="gpu-new")
    finished = tmp_path / "finished"
    shutil.copytree(pristine, finished)
    # Timed as the killed renders below run: in a process of their own, from its start.
    started = time.monotonic()
    process = gpustack_process("render", fleet, "-o", finished)
    process.join()
    assert process.exitcode == 0
    duration = time.monotonic() - started
    new = folders(finished)
    assert all(old[name] != new[name] for name in old)

    chooser = random.Random(20261126)  # deterministic kill points
    outcomes = set()
    for attempt in range(8):
        out = tmp_path / f"out{attempt}"
        # Hard links, not copies (432 files a time): gpustack never writes into an existing file
        # (it writes new files and swaps folders), so pristine stays as it is; were one written
        # in place, its bytes would differ from `old` and the comparison below would fail.
        shutil.copytree(pristine, out, copy_function=os.link)
        with _changes(out) as changed:
            process = gpustack_process("render", fleet, "-o", out)
            # Most kill points just after the writing starts (something new appears in the
            # output folder or in a cluster folder), where a folder could be left mixed; some
            # anywhere. Waiting ends early when the render does: no kill point is left then.
            if attempt % 4 == 3:
                process.join(duration * chooser.uniform(0.3, 1.0))
            else:
                select.select([changed, process.sentinel], [], [])
                process.join(chooser.uniform(0, 0.3))
        with contextlib.suppress(ProcessLookupError):  # it may have finished
            os.killpg(process.pid, signal.SIGKILL)
        process.join()
        for name, files in folders(out).items():
            if name.startswith("."):
                continue  # staging leftovers: hidden, removed by the next render
            assert files in (old[name], new[name]), f"attempt {attempt}: {name} is mixed"
            outcomes.add("old" if files == old[name] else "new")
        # The next render recovers: everything new, the user's files kept, nothing left over.
        again = gpustack("render", fleet, "-o", out)
        assert again.returncode == 0, again.stderr
        assert folders(out) == new
        assert not [name for name in os.listdir(out) if name.startswith(".")]
    assert outcomes, "no kill landed"


def test_an_interrupted_two_rename_swap_is_repaired_by_the_next_render(tmp_path, monkeypatch):
    """Where the system cannot exchange two folders in one step, a swap is two renames; dying
    between them leaves the old folder under its staging name, and the next render puts it back."""
    out = tmp_path / "out"
    output.write_tree(out / "lab", {"kustomization.yaml": HEADER.encode() + b"old\n"})
    (out / "lab").rename(out / ".lab.gpustack-old-0123456789ab")
    output.recover(out)
    assert (out / "lab" / "kustomization.yaml").read_bytes() == HEADER.encode() + b"old\n"
    monkeypatch.setattr(output, "_exchange", lambda first, second: False)
    output.write_tree(out / "lab", {"kustomization.yaml": HEADER.encode() + b"new\n"})
    assert tree(out) == {"lab/kustomization.yaml": HEADER.encode() + b"new\n"}


# --- 2. checked before the first write, rolled back after ------------------------------------


def test_a_file_where_a_folder_goes_is_refused_before_anything_is_written(tmp_path):
    fleet = make_fleet(tmp_path / "fleet", 3)
    out = tmp_path / "out"
    assert gpustack("render", fleet, "-o", out).returncode == 0
    make_fleet(fleet, 3, namespace="gpu-new")
    shutil.rmtree(out / "c01" / "node")
    (out / "c01" / "node").write_text("my own file called node\n")
    before = tree(out)
    result = gpustack("render", fleet, "-o", out, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "error: out/c01/node: is a file where gpustack writes the folder node/ "
        "(move it away or render elsewhere)\n"
    )
    assert tree(out) == before


@pytest.mark.parametrize("failing", ["write", "swap"])
def test_a_failure_while_writing_changes_nothing(cli, tmp_path, monkeypatch, failing):
    fleet = make_fleet(tmp_path / "fleet", 4)
    out = tmp_path / "out"
    assert cli("render", fleet, "-o", out).exit_code == 0
    make_fleet(fleet, 4, namespace="gpu-new")
    before = tree(out)
    calls = {"count": 0}
    if failing == "write":
        real_write = os.write

        def write(descriptor: int, data: bytes) -> int:
            calls["count"] += 1
            if calls["count"] > 30:  # some folders staged, then the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(descriptor, data)

        monkeypatch.setattr(output.os, "write", write)
    else:
        real_exchange = output._exchange

        def exchange(first: Path, second: Path) -> bool:
            calls["count"] += 1
            if calls["count"] == 3:  # two folders swapped in, then the file system goes read-only
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(second))
            return real_exchange(first, second)

        monkeypatch.setattr(output, "_exchange", exchange)
    result = cli("render", fleet, "-o", out)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    reason = "No space left on device" if failing == "write" else "Read-only file system"
    assert f"cannot write: {reason}; the output was left as it was" in result.stderr
    assert tree(out) == before
    assert not [name for name in os.listdir(out) if name.startswith(".")]


def test_output_option_naming_a_file_is_an_error(tmp_path):
    (tmp_path / "out").write_text("a file\n")
    result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: out: is not a folder;")
    assert (tmp_path / "out").read_text() == "a file\n"


# --- 3. only the outputs of the configs rendered are pruned ----------------------------------


def test_rendering_one_cluster_keeps_the_fleets_application_set(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fleet = make_fleet(tmp_path / "fleet", 2)
    (fleet / "base.yaml").write_text(
        (fleet / "base.yaml").read_text()
        + "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/gpu.git\n"
        "    applicationSet: true\n"
    )
    assert cli("render", "fleet", "-o", "out").exit_code == 0
    application_set = Path("out/_gitops/applicationset-gpustack.yaml").read_bytes()
    lone = tmp_path / "lone.yaml"
    lone.write_text(
        CONFIG + 'metadata: {name: lone}\nplatform: {profile: kubeadm, kubernetesVersion: "1.31"}\n'
    )
    assert cli("render", lone, "-o", "out").exit_code == 0
    assert Path("out/_gitops/applicationset-gpustack.yaml").read_bytes() == application_set
    # The fleet's output is current, but its ApplicationSet makes an Application of out/lone too,
    # which no config of the fleet renders: check says so.
    checked = cli("check", "fleet", "-o", "out")
    assert checked.exit_code == 1
    assert "error: out/lone:" in checked.stderr and "stale" not in checked.stderr


# --- 4. gpustack's files recognised exactly --------------------------------------------------


def test_only_files_gpustack_writes_are_pruned(tmp_path):
    out = tmp_path / "out"
    folder = out / "lab"
    output.write_tree(folder, {"kustomization.yaml": HEADER.encode() + b"resources: []\n"})
    mine = {
        "mentions.yaml": b"# Generated by gpustack, then edited by hand\n",
        "NOTES.yaml": HEADER.encode(),  # a name gpustack never writes (uppercase)
        "notes.txt": HEADER.encode(),
        "docs/guide.yaml": HEADER.encode(),  # not a folder gpustack writes
        "node/deep/x.yaml": HEADER.encode(),
    }
    for relative, content in mine.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)
    (folder / "old-object.yaml").write_bytes(HEADER.encode() + b"kind: ConfigMap\n")
    written, removed = output.write_tree(folder, {"kustomization.yaml": HEADER.encode() + b"x\n"})
    assert (written, removed) == (1, 1)
    assert tree(folder) == {**mine, "kustomization.yaml": HEADER.encode() + b"x\n"}


# --- 5. one render at a time per output folder -----------------------------------------------


def test_a_second_render_into_a_locked_folder_stops_with_a_message(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    descriptor = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # as a render in progress holds it
        result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", "out", cwd=tmp_path)
    finally:
        os.close(descriptor)
    assert result.returncode == 2
    assert result.stderr == (
        "error: out: another gpustack render is writing to this folder, or to a folder above or "
        "inside it; run again once it is done\n"
    )
    assert os.listdir(out) == []


def _held(folder: Path, mode: int) -> int:
    """A lock on `folder` as a render in progress holds it (LOCK_EX on its output folder,
    LOCK_SH on every folder above); the caller closes the descriptor."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
    return descriptor


def test_a_render_into_a_folder_inside_another_renders_output_stops(tmp_path):
    """Render A writes out/ (and will swap out/kubeadm-lab/ whole); render B into
    out/kubeadm-lab/extra/ meanwhile would be swapped away with the old folder."""
    descriptor = _held(tmp_path / "out", fcntl.LOCK_EX)
    try:
        inner = gpustack(
            "render",
            ROOT / "examples" / "kubeadm.yaml",
            "-o",
            "out/kubeadm-lab/extra",
            cwd=tmp_path,
        )
    finally:
        os.close(descriptor)
    assert inner.returncode == 2
    assert "another gpustack render is writing to this folder, or to a folder above" in inner.stderr
    assert not (tmp_path / "out" / "kubeadm-lab" / "extra" / "kubeadm-lab").exists()


def test_a_render_into_a_folder_above_a_running_render_stops(tmp_path):
    # B writes out/kubeadm-lab/extra/ (it holds the locks a render holds while writing); a
    # render into out/ would swap out/kubeadm-lab/ away with B's output in it.
    inner = tmp_path / "out" / "kubeadm-lab" / "extra"
    with output._locked(inner):
        outer = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", "out", cwd=tmp_path)
    assert outer.returncode == 2
    assert "another gpustack render is writing" in outer.stderr
    assert os.listdir(tmp_path / "out" / "kubeadm-lab") == ["extra"]


def test_renders_into_sibling_folders_do_not_block_each_other(tmp_path):
    with output._locked(tmp_path / "fleet" / "east"):  # a render into fleet/east
        west = gpustack(
            "render", ROOT / "examples" / "kubeadm.yaml", "-o", "fleet/west", cwd=tmp_path
        )
    assert west.returncode == 0, west.stderr
    assert (tmp_path / "fleet" / "west" / "kubeadm-lab" / "kustomization.yaml").is_file()


# --- 10. never across a file system boundary ----------------------------------------------------


def _mount(*arguments: str) -> None:
    done = subprocess.run(["mount", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"this machine does not let the tests mount ({done.stderr.strip()})")


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "out" / "kubeadm-lab"


@pytest.mark.parametrize("kind", ["bind", "tmpfs"])
def test_a_mount_inside_a_cluster_folder_is_refused_and_its_files_survive(tmp_path, rendered, kind):
    """A bind mount of the user's data (same file system) or another file system mounted
    inside a cluster's output folder: the swap would move it and the removal of the old folder
    would delete the mounted files through it."""
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("the user's data\n")
    mountpoint = rendered / "data"
    mountpoint.mkdir()
    if kind == "bind":
        _mount("--bind", str(precious), str(mountpoint))
    else:
        _mount("-t", "tmpfs", "none", str(mountpoint))
        (mountpoint / "data.txt").write_text("the user's data\n")
    try:
        before = tree(rendered)
        result = gpustack(
            "render",
            ROOT / "examples" / "kubeadm.yaml",
            "-o",
            "out",
            "--set",
            "devicePlugin.sharing={strategy: time-slicing, replicas: 3}",
            cwd=tmp_path,
        )
        assert result.returncode == 2
        assert result.stderr.startswith(
            "error: out/kubeadm-lab/data: is a mount point (another file system, or a bind mount) "
            "inside the output folder"
        )
        assert tree(rendered) == before  # nothing written
        assert (mountpoint / "data.txt").read_text() == "the user's data\n"
    finally:
        subprocess.run(["umount", str(mountpoint)], check=False)
    if kind == "bind":
        assert (precious / "data.txt").read_text() == "the user's data\n"


def test_removing_a_folder_never_descends_into_a_mount(tmp_path):
    """The one removal rule: what an interrupted render left (or an old folder) is removed, but
    a file system mounted inside it is left untouched, with the folders above it."""
    leftover = tmp_path / "out" / ".kubeadm-lab.gpustack-new-0123456789ab"
    (leftover / "node").mkdir(parents=True)
    (leftover / "node" / "file.yaml").write_text("x")
    mountpoint = leftover / "mounted"
    mountpoint.mkdir()
    _mount("-t", "tmpfs", "none", str(mountpoint))
    try:
        (mountpoint / "data.txt").write_text("on another file system\n")
        (mountpoint / "inner").mkdir()
        assert output.remove_tree(leftover) is False
        assert (mountpoint / "data.txt").read_text() == "on another file system\n"
        assert (mountpoint / "inner").is_dir()
        assert not (leftover / "node").exists()  # the rest is gone
    finally:
        subprocess.run(["umount", str(mountpoint)], check=False)
    assert output.remove_tree(leftover) is True
    assert not leftover.exists()


def test_removing_a_folder_never_follows_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept\n")
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "link").symlink_to(elsewhere)
    (folder / "file-link").symlink_to(elsewhere / "keep.txt")
    assert output.remove_tree(folder) is True
    assert not folder.exists()
    assert (elsewhere / "keep.txt").read_text() == "kept\n"


# --- 11. run as root in a user's checkout, the folders stay the user's -------------------------

USER = 4321  # any uid that is not root's


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can create files owned by another user")
def test_a_render_as_root_keeps_the_users_folders_the_users(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    os.chown(checkout, USER, USER)
    first = gpustack("render", ROOT / "examples" / "rke2.yaml", "-o", "checkout/out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    cluster = checkout / "out" / "rke2-mig"
    mine = checkout / "out" / "rke2-mig" / "notes"
    mine.mkdir()
    os.chmod(mine, 0o700)
    os.chown(mine, USER + 1, USER + 1)
    (mine / "todo.txt").write_text("mine\n")
    os.chown(mine / "todo.txt", USER + 1, USER + 1)
    os.chmod(cluster, 0o750)
    second = gpustack(
        "render",
        ROOT / "examples" / "rke2.yaml",
        "-o",
        "checkout/out",
        "--set",
        "devicePlugin.sharing={strategy: time-slicing, replicas: 3}",
        cwd=tmp_path,
    )
    assert second.returncode == 0, second.stderr
    # Every folder and file gpustack created is owned like the folder it is in, new or not.
    for path in [checkout / "out", *(checkout / "out").rglob("*")]:
        owner = (path.stat().st_uid, path.stat().st_gid)
        if path == mine or mine in path.parents:
            assert owner == (USER + 1, USER + 1), path
        else:
            assert owner == (USER, USER), path
    assert stat_mode(cluster) == 0o750
    assert stat_mode(mine) == 0o700
    assert (mine / "todo.txt").read_text() == "mine\n"


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


# --- 9. files carrying the certificate are as private as the PEM -----------------------------


def test_files_carrying_the_certificate_keep_the_pems_permissions(tmp_path):
    shutil.copy(ROOT / "examples" / "openshift.yaml", tmp_path / "openshift.yaml")
    pem = tmp_path / "entitlement-dummy.pem"
    shutil.copy(ROOT / "examples" / "entitlement-dummy.pem", pem)
    pem.chmod(0o600)
    result = gpustack("render", "openshift.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / "openshift-entitled"
    modes = {path.name: path.stat().st_mode & 0o777 for path in folder.glob("*.yaml")}
    private = {name for name, mode in modes.items() if mode == 0o600}
    assert private == {
        "machineconfig-50-entitlement-pem.yaml",
        "machineconfig-50-entitlement-key-pem.yaml",
    }
    assert all(modes[name] & 0o044 for name in modes.keys() - private)
    # A PEM opened up later opens the files up on the next render, and no more than 0644.
    pem.chmod(0o666)
    assert gpustack("render", "openshift.yaml", "-o", "out", cwd=tmp_path).returncode == 0
    assert (folder / "machineconfig-50-entitlement-pem.yaml").stat().st_mode & 0o777 == 0o644


def test_a_planted_staging_leftover_is_removed_never_followed(tmp_path):
    """A leftover's name is gpustack's, but a pull request can commit one: as a link to the
    user's data, or as a folder holding such links. Recovery removes the links, never their
    targets."""
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("the user's data\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".kubeadm-lab.gpustack-new-0123456789ab").symlink_to(precious)
    folder = out / ".other.gpustack-new-ba9876543210"
    folder.mkdir()
    (folder / "through").symlink_to(precious)
    result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out)) == ["kubeadm-lab"]
    assert (precious / "data.txt").read_text() == "the user's data\n"


@pytest.mark.parametrize(
    ("out", "problem"),
    [
        ("/proc", "cannot write: No such file or directory; the output was left as it was"),
        ("/sys/kernel", "cannot write: Operation not permitted; the output was left as it was"),
        ("/proc/self/gpustack", "cannot create the output folder: No such file or directory"),
    ],
)
def test_a_render_into_proc_or_sys_is_one_message(tmp_path, out, problem):
    result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", out, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.endswith(f"{problem}\n")
    assert len(result.stderr.splitlines()) == 1


def test_a_render_onto_a_read_only_file_system_is_one_message(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    _mount("-t", "tmpfs", "-o", "ro", "none", str(folder))
    try:
        for out, problem in [
            ("ro", "cannot write: Read-only file system; the output was left as it was"),
            ("ro/sub", "error: ro/sub: cannot create the output folder: Read-only file system"),
        ]:
            result = gpustack("render", ROOT / "examples" / "kubeadm.yaml", "-o", out, cwd=tmp_path)
            assert result.returncode == 2
            assert result.stderr.endswith(f"{problem}\n")
            assert len(result.stderr.splitlines()) == 1
    finally:
        subprocess.run(["umount", str(folder)], check=False)
