"""Inputs that used to be skipped, hang, exhaust memory, give a traceback or be accepted: each now
gives one message and the documented exit code, and work grows linearly with the input.

Tests run as root here, so a file made unreadable with chmod is still read: an unreadable file is
simulated in-process (the open call fails) or with something root cannot read as a file (a
folder where a file is expected). Commands run in-process (conftest.run_gpustack) with a timeout:
a command that would hang (reading a FIFO or /dev/zero) fails the test instead of stalling the
suite.
"""

from __future__ import annotations

import copy
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, run_gpustack

from gpustack import lint, reading
from gpustack.config import load_stack
from gpustack.lint import device_plugins
from gpustack.render import render

CONFIG = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
BASE = CONFIG + 'platform:\n  profile: kubeadm\n  kubernetesVersion: "1.31"\n'


def gpustack(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_gpustack(*args, cwd=cwd, timeout=120)  # a hang fails the test


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "base.yaml").write_text(BASE)
    (folder / "a.yaml").write_text("extends: base.yaml\nmetadata:\n  name: a\n")
    return folder


# --- 10. a per-cluster file that does not parse is an error, not skipped ---------------------

BROKEN = {
    "duplicate key": (
        "extends: base.yaml\nmetadata:\n  name: b\nmetadata:\n  name: c\n",
        "error: fleet/b.yaml:4:1: duplicate key 'metadata' (each key may appear once in a "
        "mapping)\n",
    ),
    "unclosed bracket": (
        "extends: base.yaml\nmetadata: {name: [b}\n",
        "error: fleet/b.yaml:2:20: invalid YAML: expected ',' or ']', but got '}' (while parsing "
        "a flow sequence that starts at line 2, column 18)\n",
    ),
    "tab": (
        "extends: base.yaml\nmetadata:\n\tname: b\n",
        "error: fleet/b.yaml:3:1: invalid YAML: found character '\\t' that cannot start any "
        "token\n",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
@pytest.mark.parametrize("command", ["render", "check"])
def test_a_broken_per_cluster_file_in_a_fleet_is_an_error(fleet, case, command):
    text, expected = BROKEN[case]
    (fleet / "b.yaml").write_text(text)
    result = gpustack(command, "fleet", "-o", "out", cwd=fleet.parent)
    assert (result.returncode, result.stderr) == (2, expected)
    assert not (fleet.parent / "out").exists()


def test_other_yaml_in_a_fleet_folder_is_still_left_alone(fleet):
    (fleet / "chart.yaml").write_text("name: {{ .Values.name }}\n")  # a Helm template
    assert gpustack("render", "fleet", "-o", "out", cwd=fleet.parent).returncode == 0


# --- 11 and 13. special and unreadable files ---------------------------------------------------


def test_special_files_are_refused_without_reading_them(fleet):
    os.mkfifo(fleet / "pipe.yaml")
    result = gpustack("render", "fleet", "-o", "out", cwd=fleet.parent)
    assert (result.returncode, result.stderr) == (
        2,
        "error: fleet/pipe.yaml: is a named pipe (FIFO), expected a config or profile\n",
    )
    (fleet / "pipe.yaml").unlink()
    (fleet / "gone.yaml").symlink_to("missing.yaml")
    result = gpustack("render", "fleet", "-o", "out", cwd=fleet.parent)
    assert (result.returncode, result.stderr) == (
        2,
        "error: fleet/gone.yaml: file not found (a symbolic link to a missing file)\n",
    )
    (fleet / "gone.yaml").unlink()
    os.mkfifo(fleet / "base-pipe.yaml")
    (fleet / "zero.yaml").symlink_to("/dev/zero")
    for base, message in [
        (
            "base-pipe.yaml",
            "base config fleet/base-pipe.yaml: is a named pipe (FIFO), expected "
            "a config or profile",
        ),
        ("zero.yaml", "base config fleet/zero.yaml: is a device, expected a config or profile"),
        ("/dev/zero", "must name a YAML config file (.yaml or .yml)"),
    ]:
        lone = fleet.parent / "lone.yaml"
        lone.write_text(f"extends: {base if base.startswith('/') else 'fleet/' + base}\n")
        result = gpustack("render", "lone.yaml", "-o", "out", cwd=fleet.parent)
        assert (result.returncode, result.stderr) == (
            2,
            f"error: lone.yaml:1:10: extends: {message}\n",
        )


def test_a_fifo_as_the_pem_file_is_refused(tmp_path):
    shutil.copy(EXAMPLES / "openshift.yaml", tmp_path / "openshift.yaml")
    os.mkfifo(tmp_path / "entitlement-dummy.pem")
    result = gpustack("render", "openshift.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.endswith(
        "entitlement.pemFile: entitlement-dummy.pem: is a named pipe (FIFO), expected an "
        "entitlement PEM\n"
    )


def test_validate_refuses_devices_and_fifos(tmp_path):
    (tmp_path / "manifests").mkdir()
    os.mkfifo(tmp_path / "manifests" / "pipe.yaml")
    result = gpustack("validate", "/dev/zero", "manifests", cwd=tmp_path)
    assert result.returncode == 1
    assert "/dev/zero - failed validation: is a device, expected a manifest file" in result.stdout
    assert "manifests/pipe.yaml - failed validation: is a named pipe (FIFO)" in result.stdout


def test_an_unreadable_file_in_a_fleet_is_one_message(cli, fleet, monkeypatch):
    real_open = os.open

    def refuse(path, flags, *args):  # what a file root cannot read would do
        if str(path).endswith("a.yaml"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(reading.os, "open", refuse)
    monkeypatch.chdir(fleet.parent)
    result = cli("render", "fleet", "-o", "out")
    assert (result.exit_code, result.stderr) == (2, "error: fleet/a.yaml: permission denied\n")


def test_an_unreadable_committed_file_is_one_message(fleet):
    assert gpustack("render", "fleet", "-o", "out", cwd=fleet.parent).returncode == 0
    kustomization = fleet.parent / "out" / "a" / "kustomization.yaml"
    kustomization.unlink()
    kustomization.mkdir()  # root can read any file, but no folder as a file
    for command in (["check", "fleet"], ["diff", "fleet/a.yaml", "--against", "out"]):
        result = (
            gpustack(*command, "-o", "out", cwd=fleet.parent)
            if command[0] == "check"
            else gpustack(*command, cwd=fleet.parent)
        )
        assert (result.returncode, result.stderr) == (
            2,
            "error: out/a/kustomization.yaml: is a folder, expected a rendered file\n",
        ), command


def test_integers_past_pythons_limit_are_one_message(fleet):
    number = "9" * 4400
    manifest = fleet.parent / "big.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {number}\n")
    # validate reads YAML as Kubernetes does: go-yaml v2's ParseInt and ParseFloat both fail on
    # such a number (ErrRange), so it stays the string it is written as, a valid name.
    result = gpustack("validate", "big.yaml", cwd=fleet.parent)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert gpustack("render", "fleet", "-o", "out", cwd=fleet.parent).returncode == 0
    committed = fleet.parent / "out" / "a" / "namespace-gpu-operator.yaml"
    if not committed.exists():
        committed = next((fleet.parent / "out" / "a").glob("namespace-*.yaml"))
    committed.write_text(committed.read_text() + f"# x\nextra: {number}\n")
    result = gpustack("diff", "fleet/a.yaml", "--against", "out", cwd=fleet.parent)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {committed.relative_to(fleet.parent)}:")
    assert result.stderr.endswith(": a number with more than 4300 digits\n")


# --- 12. linear work and output -----------------------------------------------------------------


def test_many_device_plugins_give_one_finding_each_and_linear_work(monkeypatch, tmp_path):
    stack = load_stack(EXAMPLES / "kubeadm.yaml")
    plugin = next(
        obj
        for obj in render(stack).objects
        if obj["kind"] == "DaemonSet" and "device-plugin" in obj["metadata"]["name"]
    )
    # 200 plugins: quadratic work would be 19,900 pair checks against the 200 allowed, so the bound
    # below tells linear from quadratic as surely as with more (which only made the test slow: the
    # full lint.run also pairs every DaemonSet in daemonset-selector-overlap).
    copies = []
    for index in range(200):
        each = copy.deepcopy(plugin)
        each["metadata"]["name"] = f"plugin-{index}"
        copies.append(each)
    calls = {"count": 0}
    real = device_plugins.may_share_a_node

    def counted(a, b):  # type: ignore[no-untyped-def]
        calls["count"] += 1
        return real(a, b)

    monkeypatch.setattr(device_plugins, "may_share_a_node", counted)
    found = [f for f in lint.run(copies, "1.31") if f.rule == "duplicate-device-plugin"]
    assert len(found) == 199  # each plugin after the first, once
    assert calls["count"] <= 200


# --- 14. wrong accepts --------------------------------------------------------------------------


def test_a_profile_with_a_relative_kubelet_root_is_refused(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    text = (ROOT / "profiles" / "kubeadm.yaml").read_text()
    text = text.replace("name: kubeadm", "name: lab").replace(
        "kubeletRoot: /var/lib/kubelet", "kubeletRoot: ../../../etc"
    )
    (profiles / "lab.yaml").write_text(text)
    config = tmp_path / "lab.yaml"
    config.write_text(BASE.replace("profile: kubeadm", "profile: lab") + "metadata: {name: a}\n")
    result = gpustack("render", "lab.yaml", "--profiles-dir", "profiles", cwd=tmp_path)
    assert result.returncode == 2
    line = next(n for n, s in enumerate(text.splitlines(), 1) if "kubeletRoot" in s)
    assert result.stderr == (
        f"error: profiles/lab.yaml:{line}:16: facts.kubeletRoot: '../../../etc' is not an "
        "absolute, normalized path (such as /var/lib/kubelet)\n"
    )


def test_a_backtracking_file_name_pattern_is_refused(tmp_path):
    result = gpustack("validate", "--ignore-filename-pattern", "(a+)+$", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "error: --ignore-filename-pattern: '(a+)+$' repeats a group that itself repeats; "
        "gpustack refuses patterns that can take exponential time (write the repetition once, "
        "e.g. 'a+$' for '(a+)+$')\n"
    )


# --- init writes only files of its own, and never fails with a traceback ------------------------


def test_init_never_writes_the_schema_through_a_dangling_link(tmp_path):
    (tmp_path / "gpustack.schema.json").symlink_to(tmp_path / "elsewhere" / "planted.json")
    (tmp_path / "elsewhere").mkdir()
    result = run_gpustack("init", "gpu-west.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: gpustack.schema.json: is a symbolic link;")
    assert os.listdir(tmp_path / "elsewhere") == []


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_init_never_writes_the_config_through_a_link(tmp_path, force):
    target = tmp_path / "target.yaml"
    target.write_text("the user's file\n")
    (tmp_path / "gpu-west.yaml").symlink_to(target)
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "planted.yaml")
    for name in ("gpu-west.yaml", "dangling.yaml"):
        result = run_gpustack("init", name, *force, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.startswith(f"error: {name}: is a symbolic link;"), result.stderr
    assert target.read_text() == "the user's file\n"
    assert not (tmp_path / "planted.yaml").exists()


def test_a_line_break_in_init_schema_cannot_inject_keys(tmp_path):
    result = run_gpustack(
        "init", "c.yaml", "--schema", "x.json\nnamespace: kube-system", cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --schema: cannot hold a line break")
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("/proc/gpustack.yaml", "cannot write"),
        ("/proc/self/gpu/c.yaml", "cannot create the folder"),
        ("/sys/gpustack-test/c.yaml", "cannot create the folder"),
    ],
)
def test_init_into_proc_or_sys_is_one_message(tmp_path, where, problem):
    result = run_gpustack("init", where, cwd=tmp_path)
    assert result.returncode == 2
    assert problem in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_init_on_a_read_only_file_system_is_one_message(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro", "none", str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip("this machine does not let the tests mount a read-only file system")
    try:
        for path, problem in [
            ("ro/c.yaml", "error: ro/c.yaml: cannot write: Read-only file system\n"),
            ("ro/sub/c.yaml", "error: ro/sub: cannot create the folder: Read-only file system\n"),
        ]:
            result = run_gpustack("init", path, cwd=tmp_path)
            assert (result.returncode, result.stderr) == (2, problem)
    finally:
        subprocess.run(["umount", str(folder)], check=False)


# --- no error quotes a file named by a path field -------------------------------------------------

SECRET = "s3cr3t-TOKEN-value"
MIG_CONFIG = (
    "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: a}\n"
    "platform: {profile: rke2}\ndevicePlugin: {migStrategy: single}\n"
)


@pytest.mark.parametrize(
    "content",
    [
        f"{SECRET}\n",  # plain text
        f"token: {SECRET}\n",  # a mapping of another file
        f"- {SECRET}\n",  # a list
        f'password: "{SECRET}\n',  # invalid YAML
        f"a: !{SECRET} x\n",  # a tag
        f"a: *{SECRET}\n",  # an alias
        f"{SECRET}: 1\n{SECRET}: 2\n",  # a duplicate key
        f"version: {SECRET}\nmig-configs: {{x: []}}\n",
        f"version: v1\nmig-configs: {{}}\n{SECRET}: 1\n",
    ],
)
@pytest.mark.parametrize("named", ["file", "--set"])
def test_a_file_named_by_mig_manager_config_file_is_never_quoted(tmp_path, content, named):
    (tmp_path / "token").write_text(content)
    if named == "file":
        (tmp_path / "c.yaml").write_text(MIG_CONFIG + "migManager: {config: {file: token}}\n")
        result = run_gpustack("render", "c.yaml", cwd=tmp_path)
    else:
        (tmp_path / "c.yaml").write_text(MIG_CONFIG)
        result = run_gpustack(
            "render", "c.yaml", "--set", "migManager.config.file=token", cwd=tmp_path
        )
    assert result.returncode == 2
    assert result.stderr.startswith("error: token:")
    assert SECRET not in result.stderr + result.stdout


def test_a_base_that_is_another_tools_yaml_is_never_quoted(tmp_path):
    """`extends:` may name a kubeconfig or an agent config holding a token."""
    (tmp_path / "kubeconfig.yaml").write_text(
        f"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {{token: {SECRET}}}\n"
        f"current-context: {SECRET}\n"
    )
    (tmp_path / "agent.yaml").write_text(f"token: {SECRET}\nnode-name: {SECRET}\n")
    for base in ("kubeconfig.yaml", "agent.yaml"):
        (tmp_path / "c.yaml").write_text(
            MIG_CONFIG.replace("kind: GPUStack\n", f"kind: GPUStack\nextends: {base}\n")
        )
        result = run_gpustack("render", "c.yaml", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.startswith(f"error: c.yaml:3:10: extends: base config {base} is not a")
        assert SECRET not in result.stderr


# --- merges count their work ------------------------------------------------------------------


def test_a_base_repetition_bomb_is_refused_at_once(tmp_path):
    """Two bases at each of 15 levels, each extending both below: 2**15 layers to merge."""
    (tmp_path / "a0.yaml").write_text("namespace: gpu-a\n")
    (tmp_path / "b0.yaml").write_text("namespace: gpu-b\n")
    for level in range(1, 15):
        below = level - 1
        (tmp_path / f"a{level}.yaml").write_text(f"extends: [a{below}.yaml, b{below}.yaml]\n")
        (tmp_path / f"b{level}.yaml").write_text(f"extends: [b{below}.yaml, a{below}.yaml]\n")
    (tmp_path / "c.yaml").write_text(
        MIG_CONFIG.replace("kind: GPUStack\n", "kind: GPUStack\nextends: a14.yaml\n")
    )
    result = run_gpustack("render", "c.yaml", cwd=tmp_path, timeout=20)
    assert result.returncode == 2
    assert "extends applies more than 64 bases in all" in result.stderr


def test_a_base_named_twice_in_one_list_is_refused(tmp_path):
    (tmp_path / "base.yaml").write_text("namespace: gpu-a\n")
    (tmp_path / "c.yaml").write_text(
        MIG_CONFIG.replace(
            "kind: GPUStack\n", "kind: GPUStack\nextends: [base.yaml, ./base.yaml]\n"
        )
    )
    result = run_gpustack("render", "c.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: c.yaml:3:22: extends.1: names the base ./base.yaml a second time"
    )


# --- wrong accepts ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dangling link", "folder", "fifo"])
def test_a_broken_user_profile_shadowing_a_built_in_is_an_error(tmp_path, kind):
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    shadow = profiles_dir / "rke2.yaml"
    if kind == "dangling link":
        shadow.symlink_to(tmp_path / "missing.yaml")
    elif kind == "folder":
        shadow.mkdir()
    else:
        os.mkfifo(shadow)
    (tmp_path / "c.yaml").write_text(MIG_CONFIG)
    result = run_gpustack(
        "render", "c.yaml", "--profiles-dir", "profiles", cwd=tmp_path, timeout=20
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: profiles/rke2.yaml: ")
    assert not (tmp_path / "out").exists()  # never rendered with the built-in rke2


def test_profiles_list_names_every_broken_user_profile_and_lists_the_rest(tmp_path):
    (tmp_path / "aaa.yaml").mkdir()
    (tmp_path / "zzz.yaml").symlink_to(tmp_path / "missing.yaml")
    result = run_gpustack("profiles", "list", "--profiles-dir", ".", cwd=tmp_path)
    assert result.returncode == 2
    listed = [line.split()[0] for line in result.stdout.splitlines()]
    assert listed == ["gke-cos", "gke-ubuntu", "kubeadm", "openshift", "rke2"]
    assert result.stderr.splitlines() == [
        "error: aaa.yaml: is a folder, expected a config or profile",
        "error: zzz.yaml: file not found (a symbolic link to a missing file)",
    ]


def test_a_profiles_extends_list_is_refused(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nmetadata: {name: mine}\n"
        "extends: [rke2, kubeadm]\n"
    )
    result = run_gpustack("profiles", "show", "mine", "--profiles-dir", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: mine.yaml:4:10: extends: a profile extends one profile, by name, not a list"
    )


def test_set_extends_is_refused(tmp_path):
    (tmp_path / "base.yaml").write_text("namespace: gpu-a\n")
    (tmp_path / "c.yaml").write_text(MIG_CONFIG)
    result = run_gpustack("render", "c.yaml", "--set", "extends=base.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: --set: extends: extends cannot be set with --set")


@pytest.mark.parametrize(
    ("registry", "accepted"),
    [
        ("registry.example.com:99999", False),
        ("registry.example.com:65536", False),
        ("registry.example.com:0", False),
        ("mirror:70000/nvidia", False),
        ("registry.example.com:65535", True),
        ("mirror:5000/nvidia", True),
    ],
)
def test_a_registry_port_is_a_tcp_port(tmp_path, registry, accepted):
    (tmp_path / "c.yaml").write_text(MIG_CONFIG)
    result = run_gpustack("render", "c.yaml", "--set", f"images.registry={registry}", cwd=tmp_path)
    assert result.returncode == (0 if accepted else 2), result.stderr
    if not accepted:
        assert "a port from 1 to 65535" in result.stderr


def test_a_user_profile_that_is_another_files_link_is_never_quoted(tmp_path):
    """A pull request can put a link in a profiles folder to any YAML file on the CI machine."""
    (tmp_path / "agent.yaml").write_text(f"token: {SECRET}\nnode-name: {SECRET}\n")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mine.yaml").symlink_to(tmp_path / "agent.yaml")
    for command in (["profiles", "show", "mine"], ["profiles", "list"]):
        result = run_gpustack(*command, "--profiles-dir", "profiles", cwd=tmp_path)
        assert result.returncode == 2
        assert "error: profiles/mine.yaml: not a gpustack profile" in result.stderr
        assert SECRET not in result.stderr + result.stdout
