"""Every file a config names stays inside the repository holding it (docs/security.md).

A pull request into a GitOps repository brings configs that CI renders, checks and diffs. Each
path such a config, a base or a user profile writes (`extends:`, `patches[].path`,
`entitlement.pemFile`, `migManager.config.file`), and the image lock read beside a config, is
one of the repository's own: `..`, an absolute path, a symbolic link out of the repository or a
file in `.git` is refused before a byte of it is read, at the field that names it, and nothing
of the file reaches the output, a message or the output folder. A file planted outside the
repository holds a secret that would show if it were ever read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import example_base, git, run_gpustack

SECRET = "s3cr3t-ci-token"
# Files a CI machine could hold, each as gpustack would take it: a base naming the cluster, a
# PEM, a mig-parted config, a patch and an image lock; the secret shows wherever one is read.
PLANTED = {
    "base.yaml": f"apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {{name: {SECRET}}}\n",
    "entitlement.pem": f"-----BEGIN CERTIFICATE-----\n{SECRET}\n-----END CERTIFICATE-----\n",
    "mig.yaml": f"version: v1\nmig-configs:\n  {SECRET}:\n    - devices: all\n      mig-enabled: false\n",
    "patch.yaml": f"metadata: {{annotations: {{auth: {SECRET}}}}}\n",
    "gpustack.lock": f"{SECRET}:1: sha256:{'0' * 64}\n",
}
PEM_HINT = (
    "; a certificate kept outside the repository is named on the command line: "
    "--set entitlement.pemFile=PATH"
)


@dataclass(frozen=True)
class Field:
    """A path field: the config that writes `{path}` there, where the value is (line, column
    of the path's first character) and what the error calls the file."""

    name: str
    planted: str
    config: Callable[[Path], str]
    line: int
    column: int
    what: str
    hint: str = ""


def _extends(folder: Path) -> str:
    return f"extends: [{example_base(folder)}, {{path}}]\n"


def _patch(folder: Path) -> str:
    return f"extends: {example_base(folder)}\npatches:\n- target: {{kind: DaemonSet}}\n  path: {{path}}\n"


def _pem(folder: Path) -> str:
    return (
        f"extends: {example_base(folder, 'openshift')}\n"
        "entitlement:\n  enabled: true\n  pemFile: {path}\n"
    )


def _mig(folder: Path) -> str:
    return (
        f"extends: {example_base(folder)}\n"
        "devicePlugin: {migStrategy: single}\nmigManager:\n  config:\n    file: {path}\n"
    )


FIELDS = [
    Field("extends.1", "base.yaml", _extends, 1, 35, "base config"),
    Field("patches.0.path", "patch.yaml", _patch, 4, 9, "patch file"),
    Field("entitlement.pemFile", "entitlement.pem", _pem, 4, 12, "entitlement PEM", PEM_HINT),
    Field("migManager.config.file", "mig.yaml", _mig, 5, 11, "MIG config file"),
]


def _repository(tmp_path: Path) -> Path:
    """A GitOps repository with one cluster rendered into out/, beside a folder outside it (the
    CI machine's home) holding the planted files."""
    top = tmp_path / "repository"
    (top / "clusters").mkdir(parents=True)
    git(top, "init", "-q")
    home = tmp_path / "home"
    home.mkdir()
    for name, text in PLANTED.items():
        (home / name).write_text(text)
        (top / ".git" / name).write_text(text)
    return top


def _written(top: Path, field: Field, how: str) -> tuple[str, str]:
    """The path as the config writes it for `how`, and as an error shows it (from `top`)."""
    outside = top.parent / "home" / field.planted
    if how == "dot-dot":
        return f"../../home/{field.planted}", f"clusters/../../home/{field.planted}"
    if how == "absolute":
        return str(outside), str(outside)
    if how == "link":
        (top / "links").mkdir(exist_ok=True)
        (top / "links" / field.planted).symlink_to(outside)
        return f"../links/{field.planted}", f"links/{field.planted}"
    assert how == "git"
    return f"../.git/{field.planted}", f".git/{field.planted}"


def _expected(field: Field, how: str, shown: str) -> str:
    where = f"error: clusters/cluster.yaml:{field.line}:{field.column}: {field.name}: "
    if how == "git":
        return (
            f"{where}{field.what} {shown} is in the repository's .git folder, which holds git's "
            "own data, never a config's file\n"
        )
    return (
        f"{where}{field.what} {shown} is outside the git repository holding the config (symbolic "
        "links followed); a config names only files of its own repository (keep it in the "
        f"repository, beside the configs that name it{field.hint})\n"
    )


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


def _cluster(top: Path, field: Field, written: str) -> None:
    config = field.config(top / "clusters")
    (top / "clusters" / "cluster.yaml").write_text(config.replace("{path}", written))


def _refused(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr == expected


# --- refused: `..`, an absolute path, a link out, `.git` -----------------------------------------


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "link", "git"])
@pytest.mark.parametrize("field", FIELDS, ids=lambda field: field.name)
def test_a_path_out_of_the_repository_is_refused_at_its_field(
    tmp_path: Path, field: Field, how: str
) -> None:
    top = _repository(tmp_path)
    written, shown = _written(top, field, how)
    _cluster(top, field, written)
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top)
    _refused(result, _expected(field, how, shown))
    assert result.stdout == ""


COMMANDS = [
    ["render", "clusters/cluster.yaml", "-o", "out"],
    ["render", "clusters", "-o", "out"],
    ["check", "clusters/cluster.yaml", "-o", "out"],
    ["check", "clusters", "-o", "out", "clusters/cluster.yaml"],  # the pre-commit hook
    ["diff", "clusters/cluster.yaml", "--against", "out"],
    ["diff", "clusters/cluster.yaml", "--against", "out", "--output", "markdown"],
    ["diff", "--profile", "kubeadm", "--profile", "rke2", "clusters/cluster.yaml"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("field", FIELDS, ids=lambda field: field.name)
def test_every_command_refuses_it_and_leaves_the_output_folder_as_it_was(
    tmp_path: Path, field: Field, command: list[str]
) -> None:
    top = _repository(tmp_path)
    written, shown = _written(top, field, "link")
    (top / "clusters" / "cluster.yaml").write_text(f"extends: {example_base(top / 'clusters')}\n")
    rendered = run_gpustack("render", "clusters", "-o", "out", cwd=top)
    assert rendered.returncode == 0, rendered.stderr
    before = _snapshot(top / "out")
    _cluster(top, field, written)

    if field.name == "entitlement.pemFile" and "--profile" in command:
        command = [word.replace("kubeadm", "openshift") for word in command]  # where it is read
    result = run_gpustack(*command, cwd=top)

    assert result.returncode == 2, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr.endswith(_expected(field, "link", shown)), result.stderr
    assert _snapshot(top / "out") == before


def test_diff_git_ref_refuses_a_path_out_of_the_revisions_tree(tmp_path: Path) -> None:
    """A revision's config naming a file outside the repository is refused as the working
    tree's is; the revision's tree stands for the repository."""
    top = _repository(tmp_path)
    for field in FIELDS:
        written, _ = _written(top, field, "dot-dot")
        _cluster(top, field, written)
        git(top, "add", "-A")
        git(top, "commit", "-qm", field.name)
        (top / "clusters" / "cluster.yaml").write_text(
            f"extends: {example_base(top / 'clusters')}\n"
        )
        result = run_gpustack("diff", "--git-ref", "HEAD", "clusters/cluster.yaml", cwd=top)
        assert result.returncode == 2, result.stderr
        assert SECRET not in result.stdout + result.stderr
        assert result.stderr.startswith(
            f"error: HEAD:clusters/cluster.yaml:{field.line}:{field.column}: {field.name}: "
            f"{field.what} HEAD:../home/{field.planted} is outside the git repository holding "
            "the config"
        ), result.stderr


def test_an_image_lock_linked_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    top = _repository(tmp_path)
    (top / "clusters" / "cluster.yaml").write_text(f"extends: {example_base(top / 'clusters')}\n")
    (top / "clusters" / "gpustack.lock").symlink_to(top.parent / "home" / "gpustack.lock")
    for command in (["render", "clusters", "--stdout"], ["check", "clusters", "-o", "out"]):
        result = run_gpustack(*command, cwd=top)
        _refused(
            result,
            "error: clusters/gpustack.lock: the image lock clusters/gpustack.lock is outside the "
            "git repository holding the config (symbolic links followed); a config names only "
            "files of its own repository (keep it in the repository, beside the configs that "
            "name it) [loading clusters/cluster.yaml]\n",
        )


def test_a_base_names_files_of_the_repository_it_is_in(tmp_path: Path) -> None:
    """The rule holds for every layer: a base in the repository cannot name a file out of it."""
    top = _repository(tmp_path)
    (top / "bases").mkdir()
    (top / "bases" / "common.yaml").write_text(
        f"extends: {example_base(top / 'bases')}\n"
        "patches:\n- target: {kind: DaemonSet}\n  path: ../../home/patch.yaml\n"
    )
    (top / "clusters" / "cluster.yaml").write_text("extends: ../bases/common.yaml\n")
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: bases/common.yaml:4:9: patches.0.path: patch file "
        "clusters/../bases/../../home/patch.yaml is outside the git repository holding the config"
    )


def test_a_user_profile_names_files_of_the_repository_it_is_in(tmp_path: Path) -> None:
    """A user profile in the repository (a pull request can change it too) whose defaults name a
    MIG config file out of the repository is refused at the profile's field."""
    top = _repository(tmp_path)
    (top / "profiles").mkdir()
    (top / "profiles" / "lab.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
        "metadata: {name: lab}\n"
        "defaults:\n  migManager:\n    config:\n      file: ../../home/mig.yaml\n"
    )
    (top / "clusters" / "cluster.yaml").write_text(
        f"extends: {example_base(top / 'clusters')}\nplatform: {{profile: lab}}\n"
        "devicePlugin: {migStrategy: single}\n"
    )
    result = run_gpustack(
        "render", "clusters/cluster.yaml", "--stdout", "--profiles-dir", "profiles", cwd=top
    )
    assert result.returncode == 2, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: profiles/lab.yaml:8:13: migManager.config.file: MIG config file "
        f"{(top / 'profiles').resolve()}/../../home/mig.yaml is outside the git repository "
        "holding the config"
    ), result.stderr


def test_a_fleets_link_out_of_the_repository_is_left_out_unread(tmp_path: Path) -> None:
    """Discovery reads no file through a link out of the repository: `clusters/x.yaml` linked
    to a gpustack config elsewhere on the machine is no cluster of the fleet, as `diff
    --git-ref` leaves it out of a revision."""
    top = _repository(tmp_path)
    (top / "clusters" / "cluster.yaml").write_text(f"extends: {example_base(top / 'clusters')}\n")
    elsewhere = tmp_path / "home" / "elsewhere.yaml"
    elsewhere.write_text(PLANTED["base.yaml"] + "platform: {profile: kubeadm}\n")
    (top / "clusters" / "elsewhere.yaml").symlink_to(elsewhere)
    (top / "clusters" / "inside.yaml").symlink_to("cluster.yaml")
    result = run_gpustack("render", "clusters", "-o", "out", cwd=top)
    assert result.returncode == 0, result.stderr
    assert [path.name for path in (top / "out").iterdir()] == ["kubeadm-lab"]
    assert SECRET not in result.stdout + result.stderr


# --- special files: said for what they are -------------------------------------------------------

SPECIAL = {
    "folder": (lambda path: path.mkdir(), "is a folder"),
    "fifo": (lambda path: os.mkfifo(path), "is a named pipe (FIFO)"),
    "broken-link": (lambda path: path.symlink_to("gone.yaml"), "a symbolic link to a missing file"),
}


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("field", FIELDS, ids=lambda field: field.name)
def test_a_named_file_that_is_no_regular_file_is_said_for_what_it_is(
    tmp_path: Path, field: Field, kind: str
) -> None:
    top = _repository(tmp_path)
    make, said = SPECIAL[kind]
    make(top / "clusters" / field.planted)
    _cluster(top, field, field.planted)
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top, timeout=60)
    assert result.returncode == 2, result.stderr
    line = result.stderr.splitlines()[0]
    assert line.startswith(
        f"error: clusters/cluster.yaml:{field.line}:{field.column}: {field.name}: "
    ), line
    assert said in line
    assert "not valid YAML" not in line


@pytest.mark.parametrize("kind", SPECIAL)
def test_an_image_lock_that_is_no_regular_file_is_said_for_what_it_is(
    tmp_path: Path, kind: str
) -> None:
    top = _repository(tmp_path)
    (top / "clusters" / "cluster.yaml").write_text(f"extends: {example_base(top / 'clusters')}\n")
    make, said = SPECIAL[kind]
    make(top / "clusters" / "gpustack.lock")
    result = run_gpustack("render", "clusters", "--stdout", cwd=top, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: clusters/gpustack.lock: "), result.stderr
    assert said in result.stderr


# --- allowed: anywhere in the repository, and the command line's own choice ----------------------


def _fleet(top: Path) -> None:
    """Two clusters sharing a base in a sibling folder, which names a patch, a MIG config and an
    image lock of other folders of the repository, one through a link inside it."""
    (top / "shared").mkdir()
    (top / "shared" / "team.yaml").write_text("metadata: {annotations: {team: gpu}}\n")
    (top / "shared" / "mig.yaml").write_text(
        "version: v1\nmig-configs:\n  lab-layout:\n    - devices: all\n      mig-enabled: false\n"
    )
    (top / "shared" / "link.yaml").symlink_to("team.yaml")
    (top / "bases").mkdir()
    (top / "bases" / "common.yaml").write_text(
        f"extends: {example_base(top / 'bases')}\n"
        "devicePlugin: {migStrategy: single}\n"
        "migManager: {config: {file: ../shared/mig.yaml}}\n"
        "patches:\n- target: {kind: DaemonSet}\n  path: ../shared/team.yaml\n"
    )
    for name in ("east", "west"):
        (top / "clusters" / f"{name}.yaml").write_text(
            f"extends: ../bases/common.yaml\nmetadata: {{name: {name}}}\n"
            "patches:\n- target: {kind: Service}\n  path: ../shared/link.yaml\n"
        )


def test_files_anywhere_in_the_repository_are_read_by_every_command(tmp_path: Path) -> None:
    top = _repository(tmp_path)
    _fleet(top)
    rendered = run_gpustack("render", "clusters", "-o", "out", cwd=top)
    assert rendered.returncode == 0, rendered.stderr
    assert "team: gpu" in (top / "out" / "east" / "kustomization.yaml").read_text() or any(
        "team: gpu" in path.read_text() for path in (top / "out" / "east").rglob("*.yaml")
    )
    assert "lab-layout" in "".join(
        path.read_text() for path in (top / "out" / "west").rglob("*.yaml")
    )
    for command in (
        ["check", "clusters", "-o", "out"],
        ["check", "clusters", "-o", "out", "shared/team.yaml"],  # the pre-commit hook
        ["check", "clusters", "-o", "out", "shared/mig.yaml", "bases/common.yaml"],
        ["diff", "clusters", "--against", "out"],
        ["diff", "clusters", "--against", "out", "--output", "markdown"],
    ):
        result = run_gpustack(*command, cwd=top)
        assert result.returncode == 0, (command, result.stderr)

    git(top, "add", "-A")
    git(top, "commit", "-qm", "a fleet with shared files")
    (top / "shared" / "team.yaml").write_text("metadata: {annotations: {team: ml}}\n")
    result = run_gpustack("diff", "--git-ref", "HEAD", "clusters", cwd=top)
    assert result.returncode == 1, result.stderr
    assert "team: gpu" in result.stdout and "team: ml" in result.stdout


def test_a_pem_outside_the_repository_is_named_on_the_command_line(tmp_path: Path) -> None:
    """A certificate kept out of the repository (it is a secret) is the user's own choice with
    --set; the config cannot name it."""
    top = _repository(tmp_path)
    pem = tmp_path / "secure" / "entitlement.pem"
    pem.parent.mkdir()
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (top / "clusters" / "cluster.yaml").write_text(
        f"extends: {example_base(top / 'clusters', 'openshift')}\n"
    )
    result = run_gpustack(
        "render",
        "clusters/cluster.yaml",
        "--stdout",
        "--set",
        f"entitlement.pemFile={pem}",
        cwd=top,
    )
    assert result.returncode == 0, result.stderr


def test_outside_any_repository_the_working_folder_is_the_root(tmp_path: Path) -> None:
    """Before `git init`, a fleet run from its folder reads bases anywhere in it; a config
    outside the working folder, only those of its own folder."""
    fleet = tmp_path / "fleet"
    (fleet / "clusters").mkdir(parents=True)
    (fleet / "bases").mkdir()
    (fleet / "bases" / "common.yaml").write_text(f"extends: {example_base(fleet / 'bases')}\n")
    (fleet / "clusters" / "a.yaml").write_text("extends: ../bases/common.yaml\n")
    ok = run_gpustack("render", "clusters/a.yaml", "--stdout", cwd=fleet)
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "elsewhere").mkdir()
    elsewhere = run_gpustack(
        "render", fleet / "clusters" / "a.yaml", "--stdout", cwd=tmp_path / "elsewhere"
    )
    assert elsewhere.returncode == 2
    assert "is outside the config's folder (symbolic links followed)" in elsewhere.stderr
    assert "or in a git repository that holds both" in elsewhere.stderr


def test_a_mig_config_file_given_with_set_is_the_users_own(tmp_path: Path) -> None:
    """`--set` is the command line, not the pull request: its path may lie anywhere."""
    top = _repository(tmp_path)
    mig = tmp_path / "site" / "mig.yaml"
    mig.parent.mkdir()
    mig.write_text(
        "version: v1\nmig-configs:\n  site-layout:\n    - devices: all\n      mig-enabled: false\n"
    )
    (top / "clusters" / "cluster.yaml").write_text(
        f"extends: {example_base(top / 'clusters')}\ndevicePlugin: {{migStrategy: single}}\n"
    )
    result = run_gpustack(
        "render",
        "clusters/cluster.yaml",
        "--stdout",
        "--set",
        f"migManager.config.file={mig}",
        cwd=top,
    )
    assert result.returncode == 0, result.stderr
    assert "site-layout" in result.stdout


def test_an_argo_cd_plugins_copy_of_the_repository_is_its_root(tmp_path: Path) -> None:
    """Argo CD runs the plugin in the Application's folder of a copy of the repository that may
    lack `.git`, and says which folder that is (ARGOCD_APP_SOURCE_PATH): bases anywhere in the
    copy are read, a path out of it is refused."""
    copy = tmp_path / "cmp" / "0b1c"
    app = copy / "clusters" / "gpu-east"
    app.mkdir(parents=True)
    (copy / "clusters" / "base.yaml").write_text(f"extends: {example_base(copy / 'clusters')}\n")
    (app / "gpustack.yaml").write_text("extends: ../base.yaml\nmetadata: {name: gpu-east}\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "base.yaml").write_text(PLANTED["base.yaml"])
    env = {"ARGOCD_APP_SOURCE_PATH": "clusters/gpu-east"}

    result = run_gpustack("render", "--stdout", cwd=app, env=env)
    assert result.returncode == 0, result.stderr

    # Without the variable (or with another Application's path) the copy is no repository.
    for other in ({"ARGOCD_APP_SOURCE_PATH": None}, {"ARGOCD_APP_SOURCE_PATH": "clusters/west"}):
        result = run_gpustack("render", "--stdout", cwd=app, env=other)
        assert result.returncode == 2
        assert "base config ../base.yaml is outside the working folder" in result.stderr

    (app / "gpustack.yaml").write_text("extends: ../../../../home/base.yaml\n")
    result = run_gpustack("render", "--stdout", cwd=app, env=env)
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: gpustack.yaml:1:10: extends: base config ../../../../home/base.yaml is outside "
        "the repository Argo CD gave the plugin (symbolic links followed)"
    ), result.stderr


def _shared_patch(top: Path) -> Path:
    (top / "shared").mkdir()
    (top / "shared" / "patch.yaml").write_text("metadata: {annotations: {team: gpu}}\n")
    return top / "shared" / "patch.yaml"


RESOLVED = {
    # A link to a link to a file outside: every link is followed.
    "link-chain-out": (
        lambda top: _links(top, ("a.yaml", "b.yaml"), top.parent / "home" / "patch.yaml"),
        "../links/a.yaml",
        "outside",
    ),
    # A link into `.git`, and `.git` written in another case (one folder where case is ignored).
    "link-into-git": (
        lambda top: _links(top, ("a.yaml",), top / ".git" / "patch.yaml"),
        "../links/a.yaml",
        ".git folder",
    ),
    "git-in-capitals": (lambda top: None, "../.GIT/patch.yaml", ".git folder"),
    # Out of the repository and back in: where the path resolves counts, not how it is spelt.
    "out-and-back-in": (_shared_patch, "../../repository/shared/patch.yaml", None),
    # A link in the repository to a file of the repository.
    "link-inside": (
        lambda top: _links(top, ("a.yaml",), _shared_patch(top)),
        "../links/a.yaml",
        None,
    ),
}


@pytest.mark.parametrize("case", RESOLVED)
def test_a_path_counts_where_it_resolves(tmp_path: Path, case: str) -> None:
    make, written, refused = RESOLVED[case]
    top = _repository(tmp_path)
    make(top)
    _cluster(top, FIELDS[1], written)
    result = run_gpustack("render", "clusters/cluster.yaml", "--stdout", cwd=top)
    assert SECRET not in result.stdout + result.stderr
    if refused is None:
        assert result.returncode == 0, result.stderr
        assert "team: gpu" in result.stdout
    else:
        assert result.returncode == 2
        assert result.stderr.startswith("error: clusters/cluster.yaml:4:9: patches.0.path: ")
        assert refused in result.stderr


def _links(top: Path, names: tuple[str, ...], target: Path) -> None:
    """Links in `top/links/`, each to the next, the last to `target`."""
    (top / "links").mkdir(exist_ok=True)
    for name, following in zip(names, [*names[1:], None], strict=True):
        (top / "links" / name).symlink_to(following if following else target)
