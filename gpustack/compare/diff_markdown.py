"""A fleet's diff as a pull-request review comment in Markdown (`as_markdown`): the clusters
grouped by identical changes (content hashes set aside), the most disruptive first, within a size
budget, every text a config or a file brings written literally (`literal`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack.build.decorate import CONFIG_HASH
from gpustack.compare.diff_report import (
    SIGN,
    clusters_and_fleet,
    counted,
    what_changed,
    why_not_reached,
)
from gpustack.compare.object_diff import Change, ClusterDiffs, Diff, Unreached
from gpustack.compare.rollouts import NO_RESTART, RELOADS_DRIVER
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.redaction import mask_text

# The base changes not reached that a review names at most (the text output names them all).
UNREACHED_SHOWN = 10
# GitHub refuses a comment over 65,536 characters; this leaves room for a bot's own words.
MARKDOWN_MAX_SIZE = 60_000
# What stays as it is in literal text: letters, digits, these characters, and printable
# characters beyond ASCII (Markdown's and HTML's syntax is all ASCII). Every other character
# becomes a numeric character reference, which Markdown and HTML both read as that character and
# nothing more: no code span, emphasis, link, table cell, tag or line ends there.
_SAFE = frozenset(' -.,:/"=+')


def literal(text: str) -> str:
    """`text` as literal text in Markdown, in a table cell and inside HTML alike."""
    return "".join(
        char
        if char.isalnum() or char in _SAFE or (not char.isascii() and char.isprintable())
        else f"&#{ord(char)};"
        for char in text
    )


def _code(text: str) -> str:
    return f"<code>{literal(text)}</code>"


# What the head of a review leaves at least for the summary table's header and the shortest
# closing note (about 250 characters): with it, no title or note can push a review past its size.
_HEAD_SPARE = 700


def _within(
    lines: list[str], endings: list[str], room: int, counted: Callable[[int], str]
) -> list[str]:
    """The first of `lines` that fit in `room` characters, then the first of `endings` that
    fits; past the room, the rest counted (`counted(how many)`) instead."""
    kept: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        if used + len(line) + 1 > room:
            return [*kept, counted(len(lines) - number)]
        kept.append(line)
        used += len(line) + 1
    ending = next((each for each in endings if used + len(each) + 1 <= room), None)
    return kept + ([ending] if ending is not None else endings[-1:])


def _literal_within(text: str, room: int) -> str:
    """`text` as literal text in at most `room` characters: its first characters and `…` when
    the whole does not fit."""
    whole = literal(text)
    if len(whole) <= room:
        return whole
    kept, used = [], 1  # the ellipsis
    for char in text:
        shown = literal(char)
        if used + len(shown) > room:
            break
        kept.append(shown)
        used += len(shown)
    return "".join(kept) + "…"


def _fenced(text: str, language: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}\n"


def _content_hashes(diff: Diff) -> list[str]:
    """Every content hash the diff's changes carry (Change.content_hashes), longest first."""
    found = {token for change in diff.changes for token in change.content_hashes()}
    return sorted(found, key=lambda token: (-len(token), token))


def _normalised(text: str, hashes: list[str]) -> str:
    """`text` with each content hash written `<hash>`."""
    if not hashes or not text:
        return text
    return re.sub("|".join(map(re.escape, hashes)), "<hash>", text)


def _signature(diff: Diff, hashes: list[str] | None = None) -> tuple[Any, ...]:
    """What a cluster's changes are, apart from its name: clusters with equal signatures made the
    same changes (a diff's header lines name the cluster, its hunks do not). With `hashes`, each
    content hash is written `<hash>`: a change that differs only by them (a config hash, the
    smoke test's name, which hash what differs from cluster to cluster) is the same change."""
    hashes = hashes or []

    def same(text: str | None) -> str | None:
        return _normalised(text, hashes) if text is not None else None

    return (
        tuple(
            (
                change.status,
                same(change.subject),
                same(change.file),
                same(change.renamed_from),
                change.paths,
                tuple((path, same(before), same(after)) for path, before, after in change.values),
                # A unified diff without its two header lines; any other text (binary files,
                # line endings) names its cluster, which keeps it in a group of its own.
                same(
                    change.unified.split("\n", 2)[-1]
                    if change.unified.startswith("---")
                    else change.unified
                ),
                # What it does to running nodes follows from the fields above; the nodes it
                # names (by their labels) may differ from cluster to cluster, the change not.
                change.impact,
            )
            for change in diff.changes
        ),
        diff.left_out,
    )


@dataclass(frozen=True)
class _Group:
    """Clusters whose changes are the same, and the first one's diff, which shows them;
    `hashed`: the same only once content hashes are set aside."""

    names: tuple[str, ...]
    diff: Diff
    hashed: bool = False
    nodes_differ: bool = False  # the workloads' nodes (by their labels) differ between them

    @property
    def label(self) -> str:
        if self.names == (APPLICATION_SET_DIR,):
            return f"the fleet's {APPLICATION_SET_DIR}/"
        return f"{len(self.names)} {_plural(len(self.names), 'cluster')}"

    @property
    def rank(self) -> tuple[int, ...]:
        """Most disruptive first: the driver reloaded, then pods restarted (the more workloads
        the sooner), then lasting objects changed; the checks (Jobs, whose name changes with
        everything they test) and files last; then the larger group."""
        changes = self.diff.changes
        top = max((change.impact for change in changes), default=NO_RESTART)
        restarts = sum(change.impact > NO_RESTART for change in changes)
        lasting = sum(
            change.identity is not None and change.identity[1] != "Job" for change in changes
        )
        return (-top, -restarts, -lasting, -len(self.names))


def _rollouts(diff: Diff) -> tuple[str, ...]:
    return tuple(c.rollout.sentence() for c in diff.changes if c.rollout is not None)


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


def _groups(diffs: ClusterDiffs) -> list[_Group]:
    """Differing clusters grouped by the same changes (content hashes aside), most disruptive
    first (_Group.rank); `_gitops/` last."""
    clusters, fleet = clusters_and_fleet(diffs)
    found: dict[tuple[Any, ...], list[tuple[str, Diff]]] = {}
    for name, diff in clusters:
        if not diff.is_empty:
            found.setdefault(_signature(diff, _content_hashes(diff)), []).append((name, diff))
    groups = [
        _Group(
            tuple(name for name, _ in members),
            members[0][1],
            len({_signature(diff) for _, diff in members}) > 1,
            len({_rollouts(diff) for _, diff in members}) > 1,
        )
        for members in found.values()
    ]
    groups.sort(key=lambda group: group.rank)
    if fleet is not None and not fleet.is_empty:
        groups.append(_Group((APPLICATION_SET_DIR,), fleet))
    return groups


def _listed(names: tuple[str, ...], shown: int | None = None) -> str:
    listed = ", ".join(_code(name) for name in names[:shown])
    more = len(names) - len(names[:shown])
    return listed + (f" and {more} more" if more else "")


def _field(change: Change, path: str) -> str:
    """A changed field, with its plain values when it has them (`replicas` 4 → 8)."""
    for each, before, after in change.values:
        if each == path:
            return f"{_code(path)} {literal(before)} → {literal(after)}"
    return _code(path)


def _shift(change: Change, limit: int) -> str:
    """The changed fields of a change (_field), at most `limit`."""
    shown = [_field(change, path) for path in change.paths[:limit]]
    more = len(change.paths) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _by_impact(changes: tuple[Change, ...]) -> list[Change]:
    """The changes most disruptive first, in apply order among equals."""
    return sorted(changes, key=lambda change: -change.impact)


def _follows(change: Change) -> bool:
    """Whether a change only follows from others: a new config hash, a name's new hash."""
    return bool(change.paths) and all(
        path.endswith(f'annotations["{CONFIG_HASH}"]')
        or (path == "metadata.name" and change.renamed_from is not None)
        for path in change.paths
    )


def _telling(changes: tuple[Change, ...]) -> list[Change]:
    """The changes as a headline tells them: causes before what follows from them (a config
    hash), the most disruptive first, files last."""
    return sorted(
        changes,
        key=lambda change: (_follows(change), change.identity is None, -change.impact),
    )


def _effect(group: _Group) -> str:
    """What the group's changes do to running nodes, in a few words ('' when nothing restarts)."""
    rollouts = [change.rollout for change in group.diff.changes if change.rollout is not None]
    drivers = [each for each in rollouts if each.impact == RELOADS_DRIVER]
    reloads = [each for each in drivers if each.action != "removes"]
    removed = [each for each in drivers if each.action == "removes"]
    restarts = [each for each in rollouts if each.impact != RELOADS_DRIVER]
    parts = []
    if removed:
        names = ", ".join(_code(mask_text(each.name)) for each in removed)
        parts.append(f"**removes a GPU driver DaemonSet** ({names})")
    if reloads:
        where = "; ".join(
            _code(mask_text(each.name)) + (f", {literal(each.pace)}" if each.pace else "")
            for each in reloads
        )
        parts.append(f"**reloads the GPU driver** ({where})")
    if restarts:
        count = len(restarts)
        other = " other" if drivers else ""  # beside the driver's own, said first
        parts.append(f"restarts the pods of {count}{other} {_plural(count, 'workload')}")
    return "; ".join(parts)


def _headline(group: _Group) -> str:
    """What a group changes, in a few words: what it does to running nodes, then its most
    disruptive changes with their fields."""
    described = []
    for change in _telling(group.diff.changes)[:2]:
        fields = _shift(change, 2) if change.status == "changed" and change.identity else ""
        described.append(
            f"{SIGN[change.status]} {_code(what_changed(change))}"
            + (f" {fields}" if fields else "")
        )
    more = len(group.diff.changes) - len(described)
    effect = _effect(group)
    return (
        (f"{effect}: " if effect else "")
        + "; ".join(described)
        + (f"; {more} more" if more else "")
    )


def _section(group: _Group, diff_text: str | None, note: str = "") -> str:
    """A group's collapsed details: its clusters, what it does to running nodes, its changes
    with their fields, and the unified diff of its first cluster (`diff_text`, None: left out,
    with `note`)."""
    diff = group.diff
    lines = [
        f"<details><summary>{group.label}: {literal(counted(diff.counts()))}</summary>",
        "",
    ]
    if group.names != (APPLICATION_SET_DIR,):
        lines += [f"Clusters: {_listed(group.names)}", ""]
    rollouts = [c.rollout for c in _by_impact(diff.changes) if c.rollout is not None]
    if rollouts:
        lines += ["On running nodes:", ""]
        lines += [f"- {literal(mask_text(each.sentence()))}" for each in rollouts]
        lines.append("")
    else:
        lines += ["On running nodes: no pod restarts.", ""]
    differ = []
    if group.hashed:
        differ.append(f"content hashes (the {_code(CONFIG_HASH)} annotation, a name's hash suffix)")
    if group.nodes_differ:
        differ.append("labels of the nodes each workload runs on")
    if differ:
        lines += [
            f"The {' and '.join(differ)} differ from cluster to cluster; "
            f"shown are {_code(group.names[0])}'s.",
            "",
        ]
    lines += ["| change | object or file | fields |", "|---|---|---|"]
    for change in diff.changes:
        fields = "<br>".join(_field(change, path) for path in change.paths)
        lines.append(
            f"| {SIGN[change.status]} {change.status} | {_code(what_changed(change))} | {fields} |"
        )
    lines.append("")
    first = f" of {_code(group.names[0])}" if len(group.names) > 1 else ""
    if diff_text is not None:
        lines += [f"The diff{first}{note}:", "", _fenced(diff_text, "diff")]
    else:
        lines += [f"The diff{first} is left out{note}.", ""]
    lines += ["</details>", "", ""]
    return "\n".join(lines)


def as_markdown(
    diffs: ClusterDiffs,
    title: str,
    max_size: int = MARKDOWN_MAX_SIZE,
    see_all: str | None = None,
    see_one: Callable[[str], str] | None = None,
    unreached: Sequence[Unreached] = (),
) -> str:
    """A pull-request review comment: a summary table of the clusters grouped by identical
    changes, then per group a collapsed section (its clusters, objects, fields and old → new
    values, and the unified diff of one of them).

    At most `max_size` characters (0: no limit): what does not fit is left out, largest last
    (diffs first, cut to what fits, then whole sections), and the comment ends saying what was
    left out and the commands that show it (`see_all`; `see_one(cluster)` for one cluster).
    Every text from configs or files is literal (`literal`, a fence longer than its backticks);
    secrets are masked already (diff_objects, diff_files)."""
    groups = _groups(diffs)
    head = _head(diffs, groups, title, max_size, see_all, unreached)
    rows = [_row(group) for group in groups]
    if max_size <= 0:
        sections = [_section(group, _diff_text(group)) for group in groups]
        return _joined(head, rows, 0, sections, "")
    # The table takes at most half the room; groups it has no row for are left out.
    tabled = len(rows)
    while tabled and len(_joined(head, rows[:tabled], len(rows) - tabled, [], "")) > max_size // 2:
        tabled -= 1
    left = list(groups[tabled:])
    # Each group's section whole, else with the first lines of its diff, else without its diff,
    # else left out; while the whole is too large, the last section kept is left out.
    kept: list[tuple[_Group, str, bool]] = []
    used = len(_joined(head, rows[:tabled], len(rows) - tabled, [], ""))
    for group in groups[:tabled]:
        ending = _left_out([group], left, max_size, see_all, see_one, max_size // 4)
        room = max_size - used - len(ending)
        diff_text = _diff_text(group)
        full = _section(group, diff_text)
        if len(full) <= room:
            kept.append((group, full, False))
            used += len(full)
            continue
        short = _section(group, None, " to keep this comment short")
        first_lines = _truncated(diff_text, room - len(short) - 200)
        if first_lines:
            omitted = diff_text.count("\n") - first_lines.count("\n")
            note = f" (its first lines; {omitted} more left out)"
            kept.append((group, _section(group, first_lines, note), True))
            used += len(kept[-1][1])
        elif len(short) <= room:
            kept.append((group, short, True))
            used += len(short)
        else:
            left.append(group)
    # What was left out is named most disruptive first, and its first cluster is the one whose
    # command the ending gives.
    order = {id(group): index for index, group in enumerate(groups)}
    while True:
        cut = [group for group, _, shortened in kept if shortened]
        left.sort(key=lambda group: order[id(group)])
        body = _joined(head, rows[:tabled], len(rows) - tabled, [s for _, s, _ in kept], "")
        # The ending takes at most a quarter of the room, as it was reckoned with above.
        room = min(max_size // 4, max_size - len(body))
        ending = _left_out(cut, left, max_size, see_all, see_one, room)
        text = _joined(head, rows[:tabled], len(rows) - tabled, [s for _, s, _ in kept], ending)
        if len(text) <= max_size or not kept:
            return text
        left.insert(0, kept.pop()[0])


def _head(
    diffs: ClusterDiffs,
    groups: list[_Group],
    title: str,
    max_size: int,
    see_all: str | None,
    unreached: Sequence[Unreached],
) -> list[str]:
    """The review's title, its summary line and its notes (what a profile leaves out, the base
    changes not reached); with `max_size` (0: no limit), within a share of it."""
    clusters, fleet = clusters_and_fleet(diffs)
    differing = sum(len(group.names) for group in groups if group.names != (APPLICATION_SET_DIR,))
    summary = (
        f"{differing} of {len(clusters)} {_plural(len(clusters), 'cluster')} "
        f"{'differs' if differing == 1 else 'differ'}"
        if differing
        else f"No differences in {len(clusters)} {_plural(len(clusters), 'cluster')}"
    )
    cluster_groups = len(groups) - (fleet is not None and not fleet.is_empty)
    if cluster_groups > 1:
        summary += f", in {cluster_groups} groups of identical changes"
    if fleet is not None:
        summary += f"; the fleet's {APPLICATION_SET_DIR}/ {'differs' if not fleet.is_empty else 'does not'}"
    left_out = dict.fromkeys(note for _, diff in diffs for note in diff.left_out)
    notes = [
        f"> left out for {literal(side)}: {_code(field)}: {literal(why)}  "
        for side, field, why in left_out
    ]
    # A base change that clusters set aside is news the diffs cannot show: it changed nothing.
    reached = [f"> **Not reached:** {_unreached(note)}  " for note in unreached[:UNREACHED_SHOWN]]
    more = len(unreached) - UNREACHED_SHOWN
    if more > 0:
        more_lines = [f"> and {more} more settings not reached  "]
        if see_all:
            more_lines.insert(0, f"> and {more} more settings not reached: {_code(see_all)}  ")
    else:
        more_lines = []
    head = [f"### {literal(title)}", "", summary + ".", "", *notes, *([""] if notes else [])]
    head += [*reached, *more_lines[:1], ""] if unreached else []
    if max_size <= 0 or len("\n".join(head)) <= max_size - _HEAD_SPARE:
        return head
    # The title (a path or revision the command line names) and the notes (texts of the
    # configs, and the command that shows them) then take a share of the room each, so that
    # what a pull request chooses can never push the comment past `max_size`.
    head = [f"### {_literal_within(title, max_size // 10)}", "", summary + ".", ""]
    kept_notes = _within(
        notes,
        [],
        max_size // 10,
        lambda rest: f"> and {rest} more left out {_plural(rest, 'note')}  ",
    )
    head += [*kept_notes, ""] if kept_notes else []
    kept_reached = _within(
        reached,
        more_lines,
        max_size // 4,
        lambda rest: f"> and {rest + max(more, 0)} more settings not reached  ",
    )
    head += [*kept_reached, ""] if kept_reached else []
    return head


def _unreached(note: Unreached) -> str:
    """unreached_line in Markdown: its names and places literal, five clusters at most."""
    count = len(note.clusters)
    listed = ", ".join(f"{_code(name)} ({_code(where)})" for name, where in note.clusters[:5])
    more = count - len(note.clusters[:5])
    return (
        f"the change to {_code(note.setting)} in {_code(note.base)} does not reach {count} "
        f"{why_not_reached(note)}: {listed}" + (f" and {more} more" if more else "")
    )


def _diff_text(group: _Group) -> str:
    return "".join(change.unified for change in group.diff.changes)


def _row(group: _Group) -> str:
    """The summary table's row of a group: its clusters, counts and what it changes."""
    counts = group.diff.counts()
    who = (
        _code(f"{APPLICATION_SET_DIR}/")
        if group.names == (APPLICATION_SET_DIR,)
        else f"{len(group.names)}: {_listed(group.names, 5)}"
    )
    return (
        f"| {who} | {counts['changed']} | {counts['added']} | {counts['removed']} "
        f"| {_headline(group)} |"
    )


def _joined(
    head: list[str], rows: list[str], untabled: int, sections: list[str], ending: str
) -> str:
    """The comment: its head, the summary table (`untabled`: groups left out of it), each
    section, and the note on what was left out."""
    lines = list(head)
    if rows or untabled:
        lines += [
            "| clusters | changed | added | removed | what changes |",
            "|---|---:|---:|---:|---|",
        ]
        lines += rows
        if untabled:
            lines.append(f"| {untabled} more {_plural(untabled, 'group')} | | | | left out |")
        lines.append("")
    text = "\n".join(lines) + "\n" + "".join(sections)
    return text.rstrip("\n") + "\n" + ending


def _truncated(diff_text: str, room: int) -> str:
    """The first whole lines of `diff_text` within `room` characters ('' when few fit)."""
    if room < 1000:
        return ""
    return diff_text[: diff_text.rfind("\n", 0, room) + 1]


def _counted_names(names: tuple[str, ...], named: bool = True) -> str:
    """`2 clusters (a, b)` (`named`, else `2 clusters`), and the fleet's `_gitops/` when it is
    among them."""
    clusters = tuple(name for name in names if name != APPLICATION_SET_DIR)
    listed = f" ({_listed(clusters, 5)})" if named else ""
    parts = [f"{len(clusters)} {_plural(len(clusters), 'cluster')}{listed}"]
    parts = parts if clusters else []
    parts += [f"the fleet's {APPLICATION_SET_DIR}/"] if APPLICATION_SET_DIR in names else []
    return " and ".join(parts)


def _left_out(
    cut: list[_Group],
    left: list[_Group],
    max_size: int,
    see_all: str | None,
    see_one: Callable[[str], str] | None,
    room: int,
) -> str:
    """The note on what was left out and the commands that show it, within `room` characters
    (the shortest form when none fits). The commands quote paths a pull request chooses (a config's
    file name may be thousands of characters): one that does not fit is left out, and the note
    then names only `--max-size 0`; the cluster names go, if need be, before the counts do."""
    if not cut and not left:
        return ""
    cut_names = tuple(name for group in cut for name in group.names)
    left_names = tuple(name for group in left for name in group.names)
    for named in (True, False):
        parts = []
        if cut:
            parts.append(f"all or part of the diff of {_counted_names(cut_names, named)}")
        if left:
            parts.append(f"the details of {_counted_names(left_names, named)}")
        lines = ["", f"**Left out** to stay under {max_size:,} characters: {'; '.join(parts)}."]
        commands = []
        if see_all:
            commands.append(f"Every change: {_code(see_all)} (or {_code('--max-size 0')}).")
        # The most disruptive change left out is the one cluster worth a look first.
        clusters = [group for group in (*cut, *left) if group.names != (APPLICATION_SET_DIR,)]
        if see_one and clusters:
            first = min(clusters, key=lambda group: group.rank).names[0]
            commands.append(f"One cluster: {_code(see_one(first))}.")
        shortest = f"Every change: this command with {_code('--max-size 0')}."
        for choice in (commands, commands[:1], [shortest]):
            text = "\n".join([*lines, *choice]) + "\n"
            if len(text) <= room:
                return text
    return text
