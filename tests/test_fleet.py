"""Fleets: folders of configs sharing a base, bad fleets refused before anything is written, and
parallel rendering byte-identical to serial."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from gitops_helpers import tree

from gpustack.errors import display_path
from gpustack.read import yamlio

HEADER = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
BASE = HEADER + 'platform:\n  profile: rke2\n  kubernetesVersion: "1.31"\n'


def cluster(name: str, extends: str = "base.yaml", extra: str = "") -> str:
    return f"{HEADER}extends: {extends}\nmetadata:\n  name: {name}\n{extra}"


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def test_a_well_formed_fleet_is_read_without_the_slow_parser(monkeypatch, tmp_path):
    """Positions are worked out (by ruamel's pure-Python parser, about 25 ms a file) only for an
    error: discovering and rendering a fleet whose configs extend a base must not parse any of
    them that way, or a fleet of 1,000 configs takes seconds before anything renders."""
    from gpustack.fleet import clusters as fleet
    from gpustack.read import yamlio
    from gpustack.resolve import inventory
    from gpustack.resolve import platform_profiles as profiles

    clusters = {
        f"c{index}.yaml": cluster(f"c{index}", extra=f"platform:\n  profile: {profile}\n")
        for index, profile in enumerate(sorted(profiles.BUILTIN))
    }
    write(tmp_path, {"base.yaml": BASE, **clusters})
    parsed: list[str] = []
    slow = yamlio._parse_all

    def counted(text: str, shown: str):  # type: ignore[no-untyped-def]
        parsed.append(shown)
        return slow(text, shown)

    monkeypatch.setattr(yamlio, "_parse_all", counted)
    configs = inventory.discover([tmp_path])
    assert len(configs) == len(clusters)
    assert parsed == []
    assert len(fleet.render_all(configs)) == len(clusters)
    assert parsed == []


def test_folder_renders_every_cluster_but_not_its_base(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside a git repository, bases lie in the working folder
    fleet = write(
        tmp_path / "clusters",
        {
            "base.yaml": BASE,
            "a.yaml": cluster("a"),
            "nested/b.yml": cluster("b", "../base.yaml", "platform:\n  profile: kubeadm\n"),
            "kustomization.yaml": "resources: []\n",  # other YAML in the folder is not a config
            "manifests.yaml": "kind: ConfigMap\n---\nkind: Secret\n",
            ".hidden/c.yaml": cluster("c", "../base.yaml"),  # hidden and _ folders are skipped
            "_drafts/d.yaml": cluster("d", "../base.yaml"),
        },
    )
    result = cli("render", fleet, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a", "b"]
    # a takes the base's profile (rke2); b overrides it (kubeadm).
    assert (tmp_path / "out" / "a" / "node" / "rke2-agent-config.yaml").is_file()
    assert not (tmp_path / "out" / "b" / "node" / "rke2-agent-config.yaml").exists()


def test_a_config_given_by_name_is_rendered_even_if_others_extend_it(cli, tmp_path):
    files = {"a.yaml": BASE + "metadata: {name: a}\n", "b.yaml": cluster("b", "a.yaml")}
    fleet = write(tmp_path, files)
    assert cli("render", fleet / "a.yaml", fleet / "b.yaml", "-o", tmp_path / "out").exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a", "b"]


BAD_FLEETS = {
    "empty folder": ({"README.md": "no configs here\n"}, ["no GPUStack configs", "clusters"]),
    "only other YAML": ({"kustomization.yaml": "resources: []\n"}, ["no GPUStack configs"]),
    "missing base": (
        {"a.yaml": cluster("a", "missing.yaml")},
        ["clusters/a.yaml:3:10", "extends", "missing.yaml not found"],
    ),
    "cyclic extends": (
        {"a.yaml": cluster("a", "b.yaml"), "b.yaml": cluster("b", "a.yaml")},
        ["extends forms a cycle", "clusters/a.yaml", "clusters/b.yaml"],
    ),
    "duplicate names": (
        {"base.yaml": BASE, "one.yaml": cluster("gpu"), "two.yaml": cluster("gpu")},
        ["clusters/two.yaml:5:9", "metadata.name", "'gpu'", "both clusters/one.yaml and"],
    ),
    "argocd without repoURL": (
        {"base.yaml": BASE, "a.yaml": cluster("a", extra="gitops:\n  tool: argocd\n")},
        ["clusters/a.yaml:7:3", "gitops.argocd.repoURL", "needs gitops.argocd.repoURL"],
    ),
    "flux without sourceRef": (
        {"base.yaml": BASE, "a.yaml": cluster("a", extra="gitops:\n  tool: flux\n  flux: {}\n")},
        ["clusters/a.yaml", "gitops.flux.sourceRef", "needs gitops.flux.sourceRef"],
    ),
    "destination server and name": (
        {
            "base.yaml": BASE,
            "a.yaml": cluster(
                "a",
                extra=(
                    "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/x.git\n"
                    "    destination: {server: https://k8s.example.com, name: a}\n"
                ),
            ),
        },
        ["clusters/a.yaml:10:18", "gitops.argocd.destination", "not both"],
    ),
    "path without {name}": (
        {
            "base.yaml": BASE,
            "a.yaml": cluster(
                "a",
                extra=(
                    "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/x.git\n"
                    "    path: out/fixed\n"
                ),
            ),
        },
        ["clusters/a.yaml:10:11", "gitops.argocd.path", "must contain {name}"],
    ),
    "broken config": (
        {"base.yaml": BASE, "a.yaml": HEADER + "metadata: {name: a\n"},
        ["clusters/a.yaml:", "invalid YAML"],
    ),
}


@pytest.mark.parametrize("files,expected", BAD_FLEETS.values(), ids=BAD_FLEETS.keys())
def test_bad_fleet_exits_2_names_the_problem_and_writes_nothing(
    cli, tmp_path, monkeypatch, files, expected
):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "clusters", files)
    # A good cluster rendered before must stay exactly as it was.
    write(tmp_path, {"good.yaml": BASE + "metadata:\n  name: good\n"})
    assert cli("render", "good.yaml", "-o", "out").exit_code == 0
    before = tree(tmp_path / "out")
    result = cli("render", "good.yaml", "clusters", "-o", "out")
    assert result.exit_code == 2, result.output
    for text in expected:
        assert text in result.stderr
    assert "Traceback" not in result.output
    assert tree(tmp_path / "out") == before


def test_duplicate_names_across_folders_are_refused_naming_both_files(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    named_gpu = BASE + "metadata: {name: gpu}\n"
    write(tmp_path, {"east/a.yaml": named_gpu, "west/b.yaml": named_gpu})
    result = cli("render", "east", "west", "-o", "out")
    assert result.exit_code == 2
    assert "east/a.yaml" in result.stderr and "west/b.yaml" in result.stderr
    assert not (tmp_path / "out").exists()


def _big_fleet(root: Path, count: int) -> Path:
    profiles = ["rke2", "kubeadm", "openshift"]
    tools = [
        "",
        "gitops:\n  tool: argocd\n  argocd: {repoURL: https://git.example.com/fleet.git}\n",
        "gitops:\n  tool: flux\n  flux: {sourceRef: {name: flux-system}}\n",
    ]
    taint = "{key: nvidia.com/gpu, value: present, effect: NoSchedule}"
    files = {"base.yaml": HEADER + f"nodes:\n  taints:\n  - {taint}\n"}
    for index in range(count):
        profile = profiles[index % 3]
        version = '"1.33"' if profile == "openshift" else '"1.31"'
        files[f"cluster-{index:03}.yaml"] = cluster(
            f"gpu-{index:03}",
            extra=f"platform:\n  profile: {profile}\n  kubernetesVersion: {version}\n"
            + tools[(index // 3) % 3],
        )
    return write(root, files)


def test_parallel_rendering_is_byte_identical_to_serial(cli, tmp_path):
    # 18 clusters: each of the 9 profile x GitOps-tool combinations twice, in 6 chunks for the 2
    # workers (more chunks than workers, results arriving out of order), whose 134 distinct
    # objects the --jobs 2 run validates in workers too. 60 clusters made each of the five
    # renders three times longer and exercised nothing more.
    clusters = 18
    fleet = _big_fleet(tmp_path / "clusters", clusters)
    serial = cli("render", fleet, "-o", tmp_path / "serial", "--jobs", "1")
    parallel = cli("render", fleet, "-o", tmp_path / "parallel", "--jobs", "2")
    default = cli("render", fleet, "-o", tmp_path / "default")
    assert serial.exit_code == parallel.exit_code == default.exit_code == 0, parallel.output
    expected = tree(tmp_path / "serial")
    assert len([p for p in (tmp_path / "serial").iterdir()]) == clusters
    assert tree(tmp_path / "parallel") == expected
    assert tree(tmp_path / "default") == expected
    stdout_serial = cli("render", fleet, "--stdout", "--jobs", "1").stdout
    assert cli("render", fleet, "--stdout", "--jobs", "2").stdout == stdout_serial


def test_parallel_rendering_reports_the_same_first_error_as_serial(cli, tmp_path):
    # 18 clusters in 6 chunks for the 2 workers (as above): the two broken configs are in the
    # second and the fifth chunk, so the later error may come back first.
    fleet = _big_fleet(tmp_path / "clusters", 18)
    for index in (5, 14):
        broken = fleet / f"cluster-{index:03}.yaml"
        broken.write_text(broken.read_text() + "devicePlugin:\n  migStrategy: dual\n")
    serial = cli("render", fleet, "-o", tmp_path / "out", "--jobs", "1")
    parallel = cli("render", fleet, "-o", tmp_path / "out", "--jobs", "2")
    assert serial.exit_code == parallel.exit_code == 2
    assert "cluster-005.yaml" in serial.stderr and "devicePlugin.migStrategy" in serial.stderr
    assert parallel.stderr == serial.stderr
    assert not (tmp_path / "out").exists()


def test_load_all_gives_other_commands_the_same_fleet(tmp_path, monkeypatch):
    from gpustack.resolve import inventory

    monkeypatch.chdir(tmp_path)
    files = {"base.yaml": BASE, "a.yaml": cluster("a"), "b.yaml": cluster("b")}
    write(tmp_path / "clusters", files)
    stacks = inventory.load_all([Path("clusters")])
    assert [stack.name for stack in stacks] == ["a", "b"]
    assert [stack.profile.metadata.name for stack in stacks] == ["rke2", "rke2"]
    assert inventory.discover([Path("clusters")]) == [
        Path("clusters/a.yaml"),
        Path("clusters/b.yaml"),
    ]


SCALARS = [
    "15s",
    "1.31",
    "'1.31'",
    "yes",
    "on",
    "off",
    "012",
    "0x1F",
    "0o17",
    "1_000",
    "2024-01-01",
    "1e3",
    ".inf",
    "~",
    "",
    "null",
    "True",
    "-3",
    "+3",
    "1:30",
    "3.",
    "=",
    "'='",
    "v0.20.0",
    "out/{name}",
    "[1, x, 'y']",
    "{b: c}",
    "|\n  x\n  y",
    # &, * and ! as text, not an anchor, alias or tag: a script, PromQL, a dashboard's JSON.
    "'nvidia-smi && touch /run/ready'",
    '"rate(x[5m]) * 100"',
    "|\n  max(x) != 0\n  * 1000000",
    "!!str yes",
    '"quoted: yes"',
    "0",
    "-0.5",
]


def full_parse(path: Path) -> yamlio.Document:
    """A file read by the full parser alone (ruamel), which the fast path must agree with."""
    return yamlio._parse_one(path.read_text(), display_path(path))


@pytest.mark.parametrize("scalar", SCALARS)
def test_fast_reader_reads_what_the_full_parser_reads(tmp_path, scalar):
    from gpustack.read.yamlio import load_file

    path = tmp_path / "config.yaml"
    path.write_text(f"kind: GPUStack\nmetadata:\n  name: a\nvalue: {scalar}\nlist:\n- {scalar}\n")
    fast, full = load_file(path), full_parse(path)
    assert repr(fast.data) == repr(full.data)  # same values and the same types
    assert fast.source.values == full.source.values
    assert fast.source.keys == full.source.keys


def test_gpustacks_own_output_reads_on_the_fast_path_as_the_full_parser_reads_it():
    """No committed file of out/ needs the full parser (about fifty times slower on the
    dashboard): `&&`, `!=` and `*` in quoted strings and block scalars (the driver's probes, the
    alert rules' PromQL, the dashboard's JSON) are text, not anchors, aliases or tags."""
    from conftest import ROOT

    texts: dict[str, Path] = {}  # each distinct text once: the clusters share most of these files
    for path in sorted((ROOT / "out").rglob("*.yaml")):
        texts.setdefault(path.read_text(), path)
    indicated = {}
    for text, path in texts.items():
        fast = yamlio._fast_documents(text)
        assert fast is not None, path
        if re.search(r"(?:^|[\s\[{,:])[&*!]", text, re.MULTILINE):
            indicated[text] = (path, fast)
    assert len(indicated) > 5  # the output holds such text: the comparison below runs
    for text, (path, fast) in indicated.items():
        assert fast == [document.data for document in yamlio._parse_all(text, "f")], path


@pytest.mark.parametrize(
    "text,message",
    [
        ("a: 1\na: 2\n", "2:1: duplicate key 'a'"),
        ("a: &x [1]\nb: *x\nb: 2\n", "duplicate key 'b'"),
        ("a: 1\n---\nb: 2\n", "a second YAML document starts here"),
        ("a: [1\n", "invalid YAML"),
    ],
)
def test_fast_reader_leaves_every_problem_to_the_full_parser(tmp_path, text, message):
    from gpustack.errors import UserError
    from gpustack.read.yamlio import load_file

    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_file(path)


def test_fast_reader_agrees_on_every_shipped_config_and_profile():
    from conftest import ROOT

    from gpustack.read.yamlio import load_file

    files = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "profiles").glob("*.yaml"))
    assert files
    for path in files:
        assert repr(load_file(path).data) == repr(full_parse(path).data), path


def test_clusters_with_the_same_objects_but_other_gpu_nodes_are_linted_apart(tmp_path):
    """check_all lints clusters with identical objects once: a cluster whose GPU nodes carry a
    taint its objects do not tolerate must still get its own finding, and each cluster the
    findings a lint of it alone gives."""
    import dataclasses

    from gpustack.fleet import clusters as fleet
    from gpustack.validation import lint

    write(tmp_path, {"base.yaml": BASE, "a.yaml": cluster("a"), "b.yaml": cluster("b")})
    a, b = fleet.render_all([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    assert a.objects == b.objects
    tainted = dataclasses.replace(
        b, taints=[*b.taints, {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    )
    found = fleet.check_all([a, tainted, b], jobs=1)
    assert found[0] == found[2] == []
    assert any(f.rule == "taint-not-tolerated" and "dedicated=gpu" in f.message for f in found[1])
    alone = lint.run(tainted.objects, tainted.kubernetes_version, taints=tainted.taints)
    assert found[1] == alone


def test_clusters_sharing_objects_each_get_the_output_of_a_render_of_their_own(tmp_path):
    """render_all makes the objects clusters have in common one object (in this process and in
    each worker, which sends it back once); every cluster must still get the files and findings
    of a render of its config alone, its name and GitOps paths included."""
    from gpustack.build import pipeline
    from gpustack.fleet import clusters as fleet
    from gpustack.resolve.load import load_stack
    from gpustack.validation import lint

    flux = "gitops:\n  tool: flux\n  flux: {sourceRef: {name: flux-system}}\n"
    sharing = "devicePlugin:\n  sharing: {strategy: time-slicing}\n"
    # Neighbours (which share a worker's chunk) differ in name only; pairs differ in GitOps
    # tool and GPU sharing (which changes the device plugin's objects).
    files = {"base.yaml": BASE}
    for index in range(16):
        extra = (flux if index // 2 % 2 else "") + (sharing if index // 4 % 2 else "")
        files[f"c{index:02}.yaml"] = cluster(f"c{index:02}", extra=extra)
    write(tmp_path, files)
    configs = sorted(tmp_path.glob("c*.yaml"))
    alone = [pipeline.render(load_stack(path)) for path in configs]
    expected_files = [pipeline.files(rendering) for rendering in alone]
    expected_findings = [lint.run(r.objects, r.kubernetes_version, taints=r.taints) for r in alone]
    assert expected_files[0] != expected_files[1]  # the names differ
    assert alone[0].objects != alone[4].objects  # so does GPU sharing
    for jobs in (1, 2):
        renderings = fleet.render_all(configs, jobs=jobs)
        assert [pipeline.files(rendering) for rendering in renderings] == expected_files
        assert fleet.check_all(renderings, jobs=jobs) == expected_findings
        assert [pipeline.files(rendering) for rendering in renderings] == expected_files


def test_real_path_finds_the_file_resolve_finds(tmp_path, monkeypatch):
    """Configs and their bases are told apart by real path (errors.real_path, which looks each
    folder up once): through a linked folder, `..` after a link, and a linked file, it must name
    the file Path.resolve names."""
    from gpustack.errors import real_path

    site = tmp_path / "real" / "site"
    site.mkdir(parents=True)
    (tmp_path / "real" / "base.yaml").write_text(BASE)
    (site / "a.yaml").write_text(cluster("a", "../base.yaml"))
    (site / "link.yaml").symlink_to("a.yaml")
    (tmp_path / "clusters").symlink_to(site)
    monkeypatch.chdir(tmp_path)
    paths = ["clusters/a.yaml", "clusters/../base.yaml", "clusters/link.yaml", "clusters/.."]
    paths += ["clusters/missing.yaml", ".", "real/./site/../base.yaml", str(site / "a.yaml")]
    for path in paths:
        assert real_path(path) == Path(path).resolve(), path
    assert real_path("clusters/../base.yaml") == tmp_path / "real" / "base.yaml"


ARGOCD = "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/fleet.git\n"


def _renamed_fleet(cli, root: Path, gitops: str) -> None:
    """A fleet rendered into out/, then its cluster `west` renamed `west2` and rendered again."""
    write(root, {"clusters/base.yaml": BASE + gitops, "clusters/west.yaml": cluster("west")})
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    (root / "clusters/west.yaml").write_text(cluster("west2"))


def test_a_renamed_clusters_old_folder_is_named_by_render_and_check(cli, tmp_path, monkeypatch):
    """A render never removes a whole folder (another fleet folder may render into out/), so the
    old folder of a renamed cluster stays: render and check say so, and how to remove it."""
    monkeypatch.chdir(tmp_path)
    _renamed_fleet(cli, tmp_path, ARGOCD)
    (tmp_path / "out/notes").mkdir()  # a folder of the user's, not gpustack's: never named
    result = cli("render", "clusters", "-o", "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out/west/kustomization.yaml").exists(), "render removed a whole folder"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert "out/west:" in warnings[0] and "`rm -r out/west`" in warnings[0]
    assert "notes" not in result.stderr and "_gitops" not in result.stderr
    # Each cluster's own Application keeps syncing its folder: check warns, the output is current.
    checked = cli("check", "clusters", "-o", "out")
    assert checked.exit_code == 0, checked.output
    assert "warning: out/west:" in checked.stderr and "`rm -r out/west`" in checked.stderr
    # diff against the output shows what a render changes (nothing), and names the folder too.
    diffed = cli("diff", "clusters", "-o", "out")
    assert diffed.exit_code == 0, diffed.output
    assert "warning: out/west:" in diffed.stderr and "`rm -r out/west`" in diffed.stderr
    # Rendering one config names no other folder.
    single = cli("render", "clusters/west.yaml", "-o", "out")
    assert single.exit_code == 0 and "warning" not in single.stderr, single.stderr
    # Once removed, nothing is said.
    shutil.rmtree(tmp_path / "out/west")
    quiet = cli("check", "clusters", "-o", "out")
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_a_stray_folder_an_application_set_deploys_makes_check_fail(cli, tmp_path, monkeypatch):
    """With the ApplicationSet, every folder under out/ is an Application: a renamed cluster's
    old folder is deployed for sure, so check reports it stale (exit 1), in text and in JSON."""
    monkeypatch.chdir(tmp_path)
    _renamed_fleet(cli, tmp_path, ARGOCD + "    applicationSet: true\n")
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    checked = cli("check", "clusters", "-o", "out")
    assert checked.exit_code == 1, checked.output
    assert "error: out/west:" in checked.stderr and "ApplicationSet" in checked.stderr
    assert "current and valid" not in checked.stderr
    as_json = cli("check", "clusters", "-o", "out", "--output", "json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["current"] is False and report["strays"] == ["out/west"]
    # Both fleet folders rendering into one out/ are checked together: nothing is stray then.
    write(tmp_path, {"other/base.yaml": BASE + ARGOCD + "    applicationSet: true\n"})
    write(tmp_path, {"other/west.yaml": cluster("west")})
    together = cli("check", "clusters", "other", "-o", "out")
    assert together.exit_code == 0, together.output
