"""`diff --output markdown --max-size N` never writes more than N characters, whatever the pull
request chooses: the paths of its configs (quoted by the closing commands), the texts of its
configs (the notes on what was left out) and the title's path are each given a share of the
room, and what does not fit is shortened or left out, never the limit."""

from __future__ import annotations

from conftest import examples, git
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_page import ELEMENTS, Page, to_html

from gpustack.compare.diff_markdown import as_markdown
from gpustack.compare.object_diff import Change, Diff, Unreached

# Characters that literal() writes as entities (six or more characters each), and plain ones.
TEXTS = st.builds(
    lambda piece, length: (piece * length)[:length],
    st.text(alphabet="ab-_./ <>&|`*\n", min_size=1, max_size=6),
    st.integers(min_value=0, max_value=3000),
)


def diffs(count: int, note: str, size: int) -> list[tuple[str, Diff]]:
    found = []
    for number in range(count):
        unified = "--- old/x\n+++ new/x\n" + "+line\n" * size
        change = Change(
            "changed", f"ConfigMap ns/c{number}", f"c{number}", None, ("data",), unified
        )
        notes = ((f"cluster-{number}", "spec.field", f"{note}{number}"),)
        found.append((f"cluster-{number}", Diff("old", "new", (change,), notes)))
    return found


@settings(max_examples=examples(60), deadline=None)
@given(
    max_size=st.integers(min_value=2000, max_value=9000),
    clusters=st.integers(min_value=1, max_value=12),
    lines=st.integers(min_value=0, max_value=400),
    title=TEXTS,
    command=TEXTS,
    note=TEXTS,
    unreached=st.integers(min_value=0, max_value=14),
)
def test_the_review_never_passes_its_size(
    max_size: int, clusters: int, lines: int, title: str, command: str, note: str, unreached: int
) -> None:
    # Settings a base change does not reach, named by a base path the pull request chooses.
    settings_not_reached = [
        Unreached(f"{note}/base.yaml", f"setting.{number}", ((f"c{number}", f"{note}:3:4"),))
        for number in range(unreached)
    ]
    text = as_markdown(
        diffs(clusters, note, lines),
        f"gpustack diff: {title} → rendered",
        max_size,
        f"gpustack diff {command}",
        lambda cluster: f"gpustack diff {command}/{cluster}.yaml",
        settings_not_reached,
    )
    assert len(text) <= max_size
    page = Page(to_html(text))
    assert set(page.opened) <= ELEMENTS
    assert page.opened.count("details") == page.closed.count("details")


def test_configs_with_long_paths_keep_the_review_under_its_size(cli, tmp_path, monkeypatch):
    # Configs six folders of 250 characters deep: the closing command would quote 1,700.
    deep = tmp_path.joinpath("clusters", *(letter * 250 for letter in "defghi"))
    deep.mkdir(parents=True)
    (tmp_path / "clusters" / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform: {profile: kubeadm}\n"
        "devicePlugin:\n  sharing: {strategy: time-slicing, replicas: 4}\n"
    )
    base = "../../../../../../base.yaml"
    for name in ("a", "b", "c"):
        (deep / f"{name * 200}.yaml").write_text(f"extends: {base}\nmetadata: {{name: {name}}}\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "three clusters")
    base_file = tmp_path / "clusters" / "base.yaml"
    base_file.write_text(base_file.read_text().replace("replicas: 4", "replicas: 8"))
    git(tmp_path, "commit", "-qam", "eight")
    monkeypatch.chdir(tmp_path)
    result = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "2000"
    )
    assert result.exit_code == 1, result.output
    assert len(result.stdout) <= 2000, len(result.stdout)
    shown = "".join(Page(to_html(result.stdout)).text)
    assert "Left out to stay under 2,000 characters" in shown
    # The command that quotes a 1,700-character path is left out; the way to see all is named.
    assert "d" * 250 not in result.stdout
    assert "--max-size 0" in shown
