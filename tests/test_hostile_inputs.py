"""Inputs that could be skipped, hang, exhaust memory, give a traceback or be accepted: each gives
one message and the documented exit code, and work grows linearly with the input.

Tests run as root here, so a file made unreadable with chmod is still read: an unreadable file is
simulated in-process (the open call fails) or with something root cannot read as a file (a
folder where a file is expected). Commands run in-process (conftest.run_gpustack) with a timeout:
a command that would hang (reading a FIFO or /dev/zero) fails the test instead of stalling the
suite.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, run_gpustack

from gpustack.build.pipeline import render
from gpustack.read import bounded
from gpustack.resolve.load import load_stack
from gpustack.resolve.platform_profiles import BUILTIN
from gpustack.validation import lint, schemas
from gpustack.validation.kubeyaml import MAX_EXPANDED_NODES
from gpustack.validation.lint import _pods

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
        (
            "zero.yaml",
            "base config fleet/zero.yaml is outside the working folder (symbolic links "
            "followed); a config names only files of its own repository (keep it in the "
            "repository, beside the configs that name it, or in a git repository that holds both)",
        ),
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

    monkeypatch.setattr(bounded.os, "open", refuse)
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


def test_a_committed_file_nested_past_the_limit_is_one_message(fleet):
    """A pull request's committed file nested past what libyaml reads (about 1,000 levels) but
    deeper than any manifest: refused at its place, not a RecursionError in what reads it."""
    assert gpustack("render", "fleet", "-o", "out", cwd=fleet.parent).returncode == 0
    committed = next((fleet.parent / "out" / "a").glob("namespace-*.yaml"))
    committed.write_text(committed.read_text() + "extra: " + "[" * 990 + "]" * 990 + "\n")
    result = gpustack("diff", "fleet/a.yaml", "--against", "out", cwd=fleet.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"error: {committed.relative_to(fleet.parent)}:")
    assert result.stderr.endswith(": YAML nests more than 100 levels deep\n")


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
    real = _pods.overlap

    def counted(a, b):  # type: ignore[no-untyped-def]
        calls["count"] += 1
        return real(a, b)

    monkeypatch.setattr(_pods, "overlap", counted)
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
        "absolute, normalized path (such as /var/lib/kubelet) [loading lab.yaml]\n"
    )


def test_a_pattern_re2_cannot_match_in_linear_time_is_refused(tmp_path):
    result = gpustack("validate", "--ignore-filename-pattern", "(a)\\1", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "error: --ignore-filename-pattern: bad regular expression '(a)\\\\1': invalid escape "
        "sequence (patterns use RE2's syntax, as Go's regexp (kustomize, kubeconform) does: no "
        "backreferences or lookarounds, repetition counts up to 1000)\n"
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
    assert listed == sorted(BUILTIN)  # the built-in profiles, none of the broken ones
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


# --- 15. validate: schemas are local, bounded, and never fetched --------------------------------

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.example.com}}
spec:
  group: example.com
  names: {{kind: Widget, plural: widgets}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {spec}
---
apiVersion: example.com/v1
kind: Widget
metadata: {{name: w}}
spec: {{size: 1}}
"""
CATALOG = "crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
WIDGET = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}\n"


@pytest.fixture
def listener():
    """A server on 127.0.0.1 that accepts connections and never answers: a fetch would hang on
    it, and every connection made to it is counted (`connections()`)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    accepted = []

    def connections() -> int:
        while True:
            try:
                accepted.append(server.accept()[0])
            except BlockingIOError:
                return len(accepted)

    yield server.getsockname()[1], connections
    for connection in accepted:
        connection.close()
    server.close()


def catalog(tmp_path: Path, schema: object, name: str = "widget_v1.json") -> Path:
    folder = tmp_path / "crds" / "example.com"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(schema if isinstance(schema, str) else json.dumps(schema))
    (tmp_path / "widget.yaml").write_text(WIDGET)
    return folder


def validate_widget(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return gpustack("validate", "--schema-location", CATALOG, *args, "widget.yaml", cwd=tmp_path)


def test_a_crd_whose_schema_refers_to_a_url_is_invalid_and_nothing_is_fetched(tmp_path, listener):
    port, connections = listener
    spec = f'{{$ref: "http://127.0.0.1:{port}/widget.json"}}'
    (tmp_path / "crd.yaml").write_text(WIDGET_CRD.format(spec=spec))
    result = gpustack("validate", "crd.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == (
        "crd.yaml - CustomResourceDefinition widgets.example.com is invalid: "
        "spec.versions.0.schema.openAPIV3Schema.properties.spec.$ref: $ref is not supported in a "
        "CustomResourceDefinition's schema (the API server refuses it); gpustack follows none "
        "(line 16, column 18)\n"
        "crd.yaml - Widget w failed validation: the schema from the CustomResourceDefinition of "
        "Widget has a $ref (at openAPIV3Schema.properties.spec), which the API server does not "
        "support: gpustack follows none (line 18, column 1)\n"
    )
    assert connections() == 0


def test_a_crd_whose_schema_refers_to_itself_is_invalid_too(tmp_path):
    # A local reference is as unsupported by the API server; a property named $ref is a field.
    spec = '{type: object, properties: {"$ref": {type: string}, x: {$ref: "#"}}}'
    (tmp_path / "crd.yaml").write_text(WIDGET_CRD.format(spec=spec).split("---")[0])
    result = gpustack("validate", "-o", "json", "crd.yaml", cwd=tmp_path)
    assert result.returncode == 1
    [crd] = json.loads(result.stdout)["resources"]
    fields = [finding["field"] for finding in crd["findings"]]
    assert fields == ["spec.versions.0.schema.openAPIV3Schema.properties.spec.properties.x.$ref"]


@pytest.mark.parametrize("keyword", ["$ref", "$schema"])
def test_a_schema_file_that_refers_to_a_url_is_refused_and_nothing_is_fetched(
    tmp_path, listener, keyword
):
    port, connections = listener
    url = f"http://127.0.0.1:{port}/widget.json"
    schema = {"type": "object", "properties": {"spec": {"$ref": url}}}
    if keyword == "$schema":
        schema = {"$schema": url, "type": "object"}
    catalog(tmp_path, schema)
    result = validate_widget(tmp_path)
    assert result.returncode == 1
    assert f"Widget w failed validation: crds/example.com/widget_v1.json: refers to {url}" in (
        result.stdout
    )
    assert "gpustack never fetches a schema (it validates offline)" in result.stdout
    assert connections() == 0


def test_a_url_in_a_schema_never_reaches_the_network(tmp_path, monkeypatch):
    """Also with no server listening: any connection attempt from Python fails the test."""

    def refuse(*args: object) -> None:
        raise AssertionError(f"connection attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    catalog(tmp_path, {"properties": {"spec": {"$ref": "https://example.com/s.json"}}})
    result = validate_widget(tmp_path)
    assert result.returncode == 1 and "refers to https://example.com/s.json" in result.stdout


SPECIAL = {
    "/dev/zero": lambda folder: "file:///dev/zero",
    "fifo": lambda folder: (os.mkfifo(folder / "pipe.json"), "pipe.json")[1],
    "huge": lambda folder: (
        (folder / "huge.json").write_bytes(b" " * (schemas.MAX_SCHEMA_BYTES + 1)),
        "huge.json",
    )[1],
    "folder": lambda folder: ((folder / "sub.json").mkdir(), "sub.json")[1],
    "outside": lambda folder: "../../outside.json",
    "link outside": lambda folder: (
        (folder / "link.json").symlink_to(folder.parent.parent / "outside.json"),
        "link.json",
    )[1],
}
REFUSED = {
    "/dev/zero": "schema /dev/zero is outside the schema location's folder crds",
    "fifo": "cannot read schema crds/example.com/pipe.json: is a named pipe (FIFO), expected a "
    "JSON Schema file",
    "huge": "cannot read schema crds/example.com/huge.json: file has more than 16777216 bytes "
    "(16 MiB), the most a JSON Schema file may have",
    "folder": "cannot read schema crds/example.com/sub.json: is a folder, expected a JSON "
    "Schema file",
    "outside": "is outside the schema location's folder crds",
    "link outside": "is outside the schema location's folder crds (through a symbolic link)",
}


@pytest.mark.parametrize("case", SPECIAL)
def test_a_schema_reference_reads_only_regular_bounded_files_inside_the_location(tmp_path, case):
    (tmp_path / "outside.json").write_text('{"type": "object"}')  # would make the Widget valid
    folder = catalog(tmp_path, "{}")
    target = SPECIAL[case](folder)
    catalog(tmp_path, {"type": "object", "properties": {"spec": {"$ref": target}}})
    result = validate_widget(tmp_path)
    assert result.returncode == 1, result.stdout
    assert result.stdout.startswith("widget.yaml - Widget w failed validation: ")
    assert REFUSED[case] in result.stdout, result.stdout


@pytest.mark.parametrize("case", ["fifo", "folder", "link outside"])
def test_a_schema_file_itself_is_read_only_when_regular_and_inside_the_location(tmp_path, case):
    (tmp_path / "outside.json").write_text('{"type": "object"}')
    folder = catalog(tmp_path, "{}", name="placeholder.json")
    SPECIAL[case](folder)
    name = {"fifo": "pipe.json", "folder": "sub.json", "link outside": "link.json"}[case]
    (folder / name).rename(folder / "widget_v1.json")
    result = validate_widget(tmp_path)
    assert result.returncode == 1
    expected = REFUSED[case].replace(name, "widget_v1.json")
    assert expected in result.stdout, result.stdout


def test_a_kind_or_apiversion_that_is_not_a_kubernetes_name_names_no_schema_file(tmp_path):
    # The template is filled from the manifest: '..' in its apiVersion would pick a schema the
    # pull request planted anywhere (here one that accepts everything).
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "widget_v1.json").write_text('{"type": "object"}')
    catalog(tmp_path, {"type": "object", "additionalProperties": False})
    (tmp_path / "widget.yaml").write_text(WIDGET.replace("example.com/v1", "../../planted/v1"))
    result = validate_widget(tmp_path)
    assert (result.returncode, result.stdout) == (
        1,
        "widget.yaml - Widget w failed validation: apiVersion '../../planted/v1' is not a "
        "Kubernetes group/version: no schema is looked up for it (line 1, column 1)\n",
    )
    (tmp_path / "widget.yaml").write_text(WIDGET.replace("kind: Widget", "kind: ../x"))
    result = gpustack("validate", "widget.yaml", cwd=tmp_path)  # the core location, too
    assert "kind '../x' is not a Kubernetes kind: no schema is looked up for it" in result.stdout


def test_schema_references_between_files_of_the_location_are_followed_and_cycles_end(tmp_path):
    folder = catalog(
        tmp_path,
        {"type": "object", "properties": {"spec": {"$ref": "parts.json#/definitions/spec"}}},
    )
    (folder / "parts.json").write_text(
        json.dumps(
            {
                "definitions": {
                    "spec": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "size": {"type": "string"},
                            "child": {"$ref": "widget_v1.json#/properties/spec"},
                        },
                    }
                }
            }
        )
    )
    result = validate_widget(tmp_path)
    assert result.returncode == 1
    assert 'spec.size: 1 is not of type "string"' in result.stdout  # the referred schema holds
    (tmp_path / "widget.yaml").write_text(WIDGET.replace("size: 1", 'child: {size: "1"}'))
    assert validate_widget(tmp_path).returncode == 0


def test_a_template_with_dot_dot_after_a_variable_is_a_usage_error(tmp_path):
    result = gpustack(
        "validate",
        "--schema-location",
        "crds/{{ .Group }}/../../{{ .ResourceKind }}.json",
        "-",
        cwd=tmp_path,
    )
    assert (result.returncode, result.stderr) == (
        2,
        "error: --schema-location: schema location template 'crds/{{ .Group }}/../../"
        "{{ .ResourceKind }}.json' has '..' after a variable: the schema files it names could "
        "be anywhere (write the folder the schemas are in before the first {{ variable }})\n",
    )
    # Before the first variable it is the user's own path, and it is followed.
    (tmp_path / "checkout").mkdir()
    catalog(tmp_path, {"type": "object"})
    result = gpustack(
        "validate",
        "--schema-location",
        "../" + CATALOG,
        "../widget.yaml",
        cwd=tmp_path / "checkout",
    )
    assert result.returncode == 0, result.stdout


def nested(depth: int) -> object:
    schema: object = {"type": "string"}
    for _ in range(depth):
        schema = {"properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("depth", [150, 100_000])
def test_a_schema_file_that_nests_too_deeply_is_one_message(tmp_path, depth):
    text = (
        json.dumps(nested(depth))
        if depth < 1000
        else '{"properties": {"a": ' * depth + "{}" + "}}" * depth
    )
    catalog(tmp_path, text)
    result = validate_widget(tmp_path)
    assert (result.returncode, result.stdout) == (
        1,
        "widget.yaml - Widget w failed validation: schema crds/example.com/widget_v1.json nests "
        "more than 200 levels deep (line 1, column 1)\n",
    )


@pytest.mark.parametrize("style", ["flow", "block"])
def test_a_manifest_that_nests_too_deeply_is_one_message_at_its_place(tmp_path, style):
    # 300 levels: past what the schema engine takes (a traceback before), short of libyaml's own
    # limit (1000). Nesting as in real manifests (a CRD's 24 levels) is untouched.
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n"
    if style == "flow":
        text = head + "  x: " + "[" * 300 + "]" * 300 + "\n"
    else:
        text = head + "".join(" " * (level + 2) + "k:\n" for level in range(300))
    (tmp_path / "deep.yaml").write_text(text)
    result = gpustack("validate", "deep.yaml", cwd=tmp_path)
    position = "line 5, column 204" if style == "flow" else "line 204, column 202"
    assert (result.returncode, result.stdout) == (
        1,
        f"deep.yaml - failed validation: YAML nests more than 200 levels deep ({position})\n",
    )


def test_a_crd_that_nests_too_deeply_is_one_message(tmp_path):
    spec = json.dumps(nested(120))  # 240 levels in its document
    (tmp_path / "crd.yaml").write_text(WIDGET_CRD.format(spec=spec))
    result = gpustack("validate", "crd.yaml", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "crd.yaml - failed validation: YAML nests more than 200 levels deep" in result.stdout
    # The Widget has no schema then: it is an error too, not valid.
    assert "Widget w failed validation: could not find schema for Widget" in result.stdout


def test_every_schema_is_compiled_with_the_offline_resolver():
    # jsonschema_rs's own resolver fetches http(s) URLs: one function compiles every schema, and
    # always gives it gpustack's (the tests above show that one's refusals).
    package = ROOT / "gpustack"
    calls = {
        str(path.relative_to(package)): path.read_text().count("validator_for(")
        for path in package.rglob("*.py")
        if "validator_for(" in path.read_text()
    }
    assert calls == {"validation/schemas.py": 2}
    source = (package / "validation" / "schemas.py").read_text()
    compile_source = source[source.index("def compile_schema(") : source.index("class _References")]
    assert compile_source.count("retriever=references") == 2


def test_the_files_one_schema_refers_to_are_bounded_together(tmp_path):
    folder = catalog(tmp_path, "{}")
    nine_mib = b" " * (9 * 1024 * 1024)
    (folder / "a.json").write_bytes(nine_mib + b'{"type": "object"}')
    (folder / "b.json").write_bytes(nine_mib + b'{"type": "object"}')
    catalog(tmp_path, {"allOf": [{"$ref": "a.json"}, {"$ref": "b.json"}]})
    result = validate_widget(tmp_path)
    assert result.returncode == 1
    assert (
        "crds/example.com/widget_v1.json: refers to files of more than 16777216 bytes in all "
        "(16 MiB, the most one schema may read)"
    ) in result.stdout


def test_a_valid_document_is_built_without_a_node_tree_and_findings_parse_it_once(
    tmp_path, monkeypatch
):
    # Memory follows the data: no node tree of a document is built unless a finding needs a
    # position, and then once for all of them, so a List of many invalid items costs linear time.
    from gpustack.validation import kubeyaml

    composed = []
    real = kubeyaml.compose

    def counted(text):  # type: ignore[no-untyped-def]
        composed.append(len(text))
        return real(text)

    monkeypatch.setattr(kubeyaml, "compose", counted)
    items = "".join(
        f"- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{n}}}, data: {{a: {n}}}}}\n"
        for n in range(200)
    )
    (tmp_path / "list.yaml").write_text("apiVersion: v1\nkind: List\nitems:\n" + items)
    valid = items.replace("data: {a: ", "data: {a: x")
    (tmp_path / "valid.yaml").write_text("apiVersion: v1\nkind: List\nitems:\n" + valid)
    result = gpustack("validate", "--summary", "valid.yaml", cwd=tmp_path)
    assert result.stdout.endswith("Valid: 200, Invalid: 0, Errors: 0, Skipped: 0\n")
    assert composed == []
    result = gpustack("validate", "--summary", "list.yaml", cwd=tmp_path)
    assert result.stdout.count('is not of types "null", "string"') == 200
    assert result.stdout.count("(line ") == 200
    assert "(line 203, column 71)" in result.stdout  # the last item's own value
    assert len(composed) == 1


def test_a_large_document_with_an_alias_is_not_an_alias_bomb(tmp_path):
    # Only what aliases add counts against the limit, so a large mapping that also uses one alias
    # is no bomb; a real bomb is refused (tests/test_validate_yaml11.py).
    # More values than the limit, counting the mapping's values alone.
    keys = "".join(f"  k{n}: v\n" for n in range(MAX_EXPANDED_NODES + 1))
    (tmp_path / "big.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  labels: &l {a: b}\n"
        "  annotations: *l\ndata:\n" + keys
    )
    result = gpustack("validate", "--summary", "big.yaml", cwd=tmp_path)
    assert result.stdout.endswith("Valid: 1, Invalid: 0, Errors: 0, Skipped: 0\n"), result.stdout


def test_empty_documents_are_passed_over_without_parsing_them(tmp_path, monkeypatch):
    # A stream of many documents is read one at a time; a bare `---` is not even parsed (a
    # million of them held every chunk in a list and parsed each: 250 MiB for 4 MiB of input).
    from gpustack.validation import kubeyaml

    parsed = []
    real = kubeyaml.load
    monkeypatch.setattr(kubeyaml, "load", lambda text: parsed.append(text) or real(text))
    manifest = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
    (tmp_path / "many.yaml").write_text("---\n" * 10_000 + manifest + "--- \n" * 10_000)
    result = gpustack("validate", "--summary", "many.yaml", cwd=tmp_path)
    assert result.stdout == (
        "Summary: 1 resource found in 1 file - Valid: 1, Invalid: 0, Errors: 0, Skipped: 0\n"
    )
    assert len(parsed) == 1


def test_references_that_repeat_references_are_refused_not_evaluated(tmp_path):
    # Each definition refers twice to the next, 30 times over: 2**30 checks of one value, an
    # hour of validation, refused like an alias bomb. Reuse that does not multiply is fine.
    definitions = {f"d{n}": {"allOf": [{"$ref": f"#/definitions/d{n + 1}"}] * 2} for n in range(30)}
    definitions["d30"] = {"type": "object"}
    catalog(tmp_path, {"definitions": definitions, "$ref": "#/definitions/d0"})
    result = validate_widget(tmp_path)
    assert (result.returncode, result.stdout) == (
        1,
        "widget.yaml - Widget w failed validation: schema crds/example.com/widget_v1.json: its "
        "references make a value be checked against more than 10000 schemas at once (a "
        "reference bomb) (line 1, column 1)\n",
    )
    definitions = {f"d{n}": {"$ref": f"#/definitions/d{n + 1}"} for n in range(30)}
    definitions["d30"] = {"type": "object"}
    catalog(tmp_path, {"definitions": definitions, "$ref": "#/definitions/d0"})
    assert validate_widget(tmp_path).returncode == 0


@pytest.mark.parametrize("output", ["text", "pretty"])
def test_validate_prints_a_file_name_on_one_line(tmp_path: Path, output: str) -> None:
    """A manifest a pull request adds may be named with a line break: validate's line about it
    stays one line (a `::error::` line of its own would be a GitHub Actions command)."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "b\n::error::y.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n"
    )
    result = run_gpustack("validate", "--output", output, folder)
    assert result.returncode == 1
    assert not any(line.startswith("::") for line in result.stdout.splitlines()), result.stdout
    assert "b?::error::y.yaml" in result.stdout
