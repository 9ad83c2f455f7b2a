"""The narrowed `check FILE...` (the pre-commit hook) never says yes where the whole check says
no: random fleets, random changes, both verdicts compared. When narrowing cannot be sure which
clusters a change reaches, it widens (gpustack.compare.changes).

Each example builds a small fleet (configs extending a base, written plainly or with a YAML
escape, node pools named like other clusters, a user profile shadowing a built-in's parent),
renders it, changes some of its files as a commit would, and runs `check` on the whole fleet
and on the changed files alone.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import examples, run_gpustack
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpustack.resolve.platform_profiles import data_dir

HEAD = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
OPTIONS = ("-o", "out", "--profiles-dir", "profiles")
LAB = (
    "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
    "metadata: {{name: lab, description: the lab's clusters}}\n"
    "defaults: {{namespace: {namespace}}}\n"
)
ARGOCD_SET = (
    "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/fleet.git\n"
    "    applicationSet: true\n"
)
# A base written plainly, or through escapes that a YAML parser reads as the same path.
BASE_SPELLINGS = ["base.yaml", '"b\\x61se.yaml"', '"base\\u002eyaml"', "'base.yaml'"]


@dataclass(frozen=True)
class Cluster:
    name: str
    profile: str
    spelling: str  # how its `extends:` writes the base's path
    pool: str | None  # the name of its one node pool, if any


@dataclass(frozen=True)
class Fleet:
    clusters: tuple[Cluster, ...]
    smoke_test: bool  # the base's setting a change may flip
    # One Argo CD ApplicationSet deploys every folder of out/: a stray folder is an error.
    application_set: bool = False


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    count = draw(st.integers(min_value=2, max_value=3))
    names = [f"c{number}" for number in range(count)]
    clusters = []
    for name in names:
        profile = draw(st.sampled_from(["kubeadm", "rke2", "gke-ubuntu", "lab"]))
        # Pools (not on GKE here, whose pools need node pool settings) may take a cluster's name.
        pool = None
        if profile != "gke-ubuntu":
            pool = draw(st.none() | st.sampled_from([*names, "c9", "gpu"]))
        spelling = draw(st.sampled_from(BASE_SPELLINGS))
        clusters.append(Cluster(name, profile, spelling, pool))
    return Fleet(tuple(clusters), draw(st.booleans()), draw(st.booleans()))


CHANGES = st.lists(
    st.sampled_from(
        [
            "base",
            "config",
            "rename",
            "shadowed-profile",
            "user-profile",
            "output",
            "node-file",
            "pool",
        ]
    ),
    min_size=1,
    max_size=2,
    unique=True,
)


def config_text(cluster: Cluster, name: str | None = None) -> str:
    text = HEAD + f"extends: {cluster.spelling}\nmetadata: {{name: {name or cluster.name}}}\n"
    text += f"platform: {{profile: {cluster.profile}}}\n"
    if cluster.pool is not None:
        text += (
            "nodes:\n  pools:\n"
            f"  - name: {cluster.pool}\n    selector: {{example.com/gpu-pool: {cluster.pool}}}\n"
        )
    return text


def build(root: Path, fleet: Fleet) -> None:
    (root / "fleet").mkdir()
    (root / "profiles").mkdir()
    smoke = "true" if fleet.smoke_test else "false"
    gitops = ARGOCD_SET if fleet.application_set else ""
    (root / "fleet" / "base.yaml").write_text(HEAD + f"smokeTest: {{enabled: {smoke}}}\n" + gitops)
    for cluster in fleet.clusters:
        (root / "fleet" / f"{cluster.name}.yaml").write_text(config_text(cluster))
    # A user profile shadowing gke-ubuntu's parent, as the built-in one has it, and one of the
    # user's own that extends kubeadm.
    shutil.copy(data_dir("profiles") / "gke-cos.yaml", root / "profiles" / "gke-cos.yaml")
    (root / "profiles" / "lab.yaml").write_text(LAB.format(namespace="gpu-system"))


def change(root: Path, fleet: Fleet, what: str, which: int) -> list[Path]:
    """Change the fleet as a commit would; the files it changes (pre-commit's names)."""
    cluster = fleet.clusters[which % len(fleet.clusters)]
    config = root / "fleet" / f"{cluster.name}.yaml"
    if what == "base":
        base = root / "fleet" / "base.yaml"
        text = base.read_text()
        flipped = text.replace("true", "false") if "true" in text else text.replace("false", "true")
        base.write_text(flipped)
        return [base]
    if what == "config":
        config.write_text(config.read_text() + "dcgmExporter: {enabled: false}\n")
        return [config]
    if what == "rename":
        # Renamed and rendered: its new folder is committed, its old one left behind.
        config.write_text(config_text(cluster, "renamed"))
        before = set((root / "out").rglob("*"))
        rendered = run_gpustack("render", str(config.relative_to(root)), *OPTIONS, cwd=root)
        assert rendered.returncode == 0, rendered.stderr
        added = sorted(set((root / "out").rglob("*")) - before)
        return [config, *(path for path in added if path.is_file())]
    if what == "shadowed-profile":
        profile = root / "profiles" / "gke-cos.yaml"
        profile.write_text(profile.read_text().replace("/home/kubernetes/bin/nvidia", "/opt/nv"))
        return [profile]
    if what == "user-profile":
        profile = root / "profiles" / "lab.yaml"
        profile.write_text(LAB.format(namespace="gpu-lab"))
        return [profile]
    if what == "node-file":
        readme = root / "out" / cluster.name / "node" / "README.md"
        if not readme.is_file():
            return []
        readme.write_text(readme.read_text() + "\nEdited by hand.\n")
        return [readme]
    if what == "pool":
        # A pool named like another cluster: no output folder changes owner for it.
        other = fleet.clusters[(which + 1) % len(fleet.clusters)].name
        if cluster.profile == "gke-ubuntu" or cluster.pool is not None:
            return []
        config.write_text(
            config.read_text()
            + f"nodes:\n  pools:\n  - name: {other}\n"
            + f"    selector: {{example.com/gpu-pool: {other}}}\n"
        )
        return [config]
    kustomization = root / "out" / cluster.name / "kustomization.yaml"
    if not kustomization.is_file():
        return []
    kustomization.write_text(kustomization.read_text() + "# edited by hand\n")
    return [kustomization]


def verdict(root: Path, *changed: Path) -> tuple[int, set[str]]:
    """The exit code and the output folders called stale or stray."""
    result = run_gpustack(
        "check", "fleet", *OPTIONS, *(str(path.relative_to(root)) for path in changed), cwd=root
    )
    assert result.returncode in (0, 1), result.stderr
    named = set(
        re.findall(
            r"out/([a-z0-9-]+)",
            "\n".join(line for line in result.stderr.splitlines() if line.startswith("error:")),
        )
    )
    return result.returncode, named


# Changes the narrowed check must widen for, tried in every run: a user profile shadowing a
# built-in's parent, a renamed cluster whose old name a pool keeps, a base written with an escape.
SHADOWED_PARENT = Fleet(
    (Cluster("c0", "kubeadm", "base.yaml", None), Cluster("c1", "gke-ubuntu", "base.yaml", None)),
    True,
)
OLD_NAME_AS_POOL = Fleet(
    (Cluster("c0", "rke2", "base.yaml", "c1"), Cluster("c1", "kubeadm", "base.yaml", None)),
    True,
    application_set=True,
)
ESCAPED_BASE = Fleet(
    (Cluster("c0", "kubeadm", "base.yaml", None), Cluster("c1", "rke2", '"b\\x61se.yaml"', None)),
    False,
)


@example(fleet=SHADOWED_PARENT, changes=["shadowed-profile"], which=0)
@example(fleet=OLD_NAME_AS_POOL, changes=["rename"], which=1)
@example(fleet=ESCAPED_BASE, changes=["base"], which=0)
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(fleet=fleets(), changes=CHANGES, which=st.integers(min_value=0, max_value=2))
def test_the_narrowed_check_never_passes_what_the_whole_check_fails(
    tmp_path_factory: pytest.TempPathFactory, fleet: Fleet, changes: list[str], which: int
) -> None:
    root = tmp_path_factory.mktemp("fleet")
    build(root, fleet)
    rendered = run_gpustack("render", "fleet", *OPTIONS, cwd=root)
    assert rendered.returncode == 0, rendered.stderr
    changed: list[Path] = []
    for what in changes:
        changed += [path for path in change(root, fleet, what, which) if path not in changed]
    if not changed:
        return
    whole, whole_named = verdict(root)
    narrowed, narrowed_named = verdict(root, *changed)
    if whole:
        assert narrowed, (changes, fleet)
        assert whole_named <= narrowed_named, (changes, fleet)


# --- how the byte scan widens, without rendering -------------------------------------------------


def scanned(tmp_path: Path, files: dict[str, bytes], changed: str) -> list[str] | None:
    """changes.scan's verdict for a fleet folder of `files` and one changed file: the names of
    the files it picks, or None for every config."""
    from gpustack.compare import changes

    folder = tmp_path / "fleet"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    texts = changes.read_fleet([folder])
    assert texts is not None
    picked = changes.scan(texts, [folder], [folder / changed], tmp_path / "out", None)
    return None if picked is None else [path.name for path in picked]


CLUSTER = HEAD.encode() + b"metadata: {name: a}\nplatform: {profile: kubeadm}\n"
OTHER = HEAD.encode() + b"metadata: {name: b}\nplatform: {profile: kubeadm}\n"


def test_a_quoted_name_is_found_with_its_quote_doubled(tmp_path: Path) -> None:
    files = {
        "it's.yaml": b"smokeTest: {enabled: true}\n",
        "a.yaml": CLUSTER + b"extends: 'it''s.yaml'\n",
        "b.yaml": OTHER,
    }
    assert scanned(tmp_path, files, "it's.yaml") == ["a.yaml", "it's.yaml"]


def test_a_name_in_another_case_is_found(tmp_path: Path) -> None:
    # As a case-insensitive file system (macOS, Windows) opens `Base.yaml` for `base.yaml`.
    files = {
        "base.yaml": b"smokeTest: {enabled: true}\n",
        "a.yaml": CLUSTER + b"extends: Base.YAML\n",
        "b.yaml": OTHER,
    }
    assert scanned(tmp_path, files, "base.yaml") == ["a.yaml", "base.yaml"]


@pytest.mark.parametrize(
    "spelling",
    [b'"b\\x61se.yaml"', b'"base\\u002eyaml"', b'"ba\\\n  se.yaml"'],
    ids=["hex escape", "unicode escape", "escaped line break"],
)
def test_an_escape_anywhere_widens_to_every_config(tmp_path: Path, spelling: bytes) -> None:
    files = {
        "base.yaml": b"smokeTest: {enabled: true}\n",
        "a.yaml": CLUSTER + b"extends: " + spelling + b"\n",
        "b.yaml": OTHER,
    }
    assert scanned(tmp_path, files, "base.yaml") is None


def test_a_utf16_text_widens_to_every_config(tmp_path: Path) -> None:
    files = {
        "base.yaml": b"smokeTest: {enabled: true}\n",
        "a.yaml": (CLUSTER.decode() + "extends: base.yaml\n").encode("utf-16"),
        "b.yaml": OTHER,
    }
    assert scanned(tmp_path, files, "base.yaml") is None
