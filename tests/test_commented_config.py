"""The one writer of config files a person edits (config/commented.py): what it writes reads
back as the data it was given, in gpustack's reader and in another YAML reader; a field shown
commented out becomes that setting when its lines are uncommented; editing a user's file keeps
what the user wrote around the fields set."""

from __future__ import annotations

import re

import pytest
from ruamel.yaml import YAML

from gpustack.config.commented import Field, config_text, edited
from gpustack.read.yamlio import load_text

# Strings a careless writer leaves plain and a YAML reader then takes for something else.
TRICKY = [
    "on",
    "yes",
    "No",
    "y",
    "null",
    "~",
    "1.33",
    "0x1F",
    "1:30",
    "",
    " lead",
    "a: b",
    "#tag",
    "- item",
    "x # y",
    "a, b",
    "{x}",
    "[x]",
    "it's",
    'say "hi"',
    "line\nbreak",
    "2025-01-01",
    "*ref",
    "&anchor",
    "!tag",
    "%dir",
    "@at",
    "`tick`",
    "?q",
    "a:b",
    "http://x/y",
    "|pipe",
    ">gt",
]


def both_readers(text: str) -> tuple[object, object]:
    return load_text(text, "test.yaml").data, YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize("flow", [False, True])
def test_every_value_reads_back_as_written(flow: bool) -> None:
    data = {
        "plain": "15s",
        "tricky": {f"k{index}": value for index, value in enumerate(TRICKY)},
        "numbers": {"count": 8, "ratio": 0.5, "on": True, "off": False, "none": None},
        "listed": [*TRICKY, 3, True],
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "empty": {"map": {}, "list": []},
    }
    fields = [
        Field(f"{section}.{key}", value, "why")
        for section, values in data.items()
        if isinstance(values, dict)
        for key, value in values.items()
    ]
    fields += [Field(key, value) for key, value in data.items() if not isinstance(value, dict)]
    text = config_text(fields, flow=flow)
    for read in both_readers(text):
        assert read == data, text


def uncommented(text: str) -> str:
    return "\n".join(re.sub(r"^( *)# ", r"\1", line) for line in text.splitlines()) + "\n"


def test_a_field_shown_commented_out_is_that_setting_once_uncommented() -> None:
    fields = [
        Field("metadata.name", "demo", "the name"),
        Field("platform.profile", "kubeadm"),
        Field("platform.kubernetesVersion", "1.33", "target", written=False),
        Field("nodes.selector", {"gpu": "true"}, "labels", written=False),
        Field("nodes.taints", [{"key": "sku", "effect": "NoSchedule"}], "taints", written=False),
        Field("images.pullSecrets", ["a", "b"], written=False),
    ]
    text = config_text(fields, "# a header\n", column=20, flow=True)
    assert text.startswith("# a header\n")
    written, _ = both_readers(text)
    assert written == {"metadata": {"name": "demo"}, "platform": {"profile": "kubeadm"}}
    # Uncommenting a section's lines (the `# ` at its depth) gives each shown value.
    everything, _ = both_readers(uncommented(text.split("\n", 1)[1]))
    assert everything == {
        "metadata": {"name": "demo"},
        "platform": {"profile": "kubeadm", "kubernetesVersion": "1.33"},
        "nodes": {"selector": {"gpu": "true"}, "taints": [{"key": "sku", "effect": "NoSchedule"}]},
        "images": {"pullSecrets": ["a", "b"]},
    }
    # A commented-out field of a written section is marked at its own depth; comments start
    # in the column asked for, or one space after a longer line.
    assert text.splitlines()[1:] == [
        "metadata:",
        "  name: demo       # the name",
        "platform:",
        "  profile: kubeadm",
        '  # kubernetesVersion: "1.33" # target',
        "# nodes:",
        '#   selector: {gpu: "true"} # labels',
        "#   taints:        # taints",
        "#   - {key: sku, effect: NoSchedule}",
        "# images:",
        "#   pullSecrets: [a, b]",
    ]


def test_comments_of_a_mapping_line_up_two_spaces_after_its_longest_line() -> None:
    text = config_text(
        [
            Field("driver.mode", "container", "from a"),
            Field("driver.version", "570.172.08", "from b"),
            Field("toolkit.version", "v1.17.8", "from c"),
        ]
    )
    assert text.splitlines() == [
        "driver:",
        "  mode: container      # from a",
        "  version: 570.172.08  # from b",
        "toolkit:",
        "  version: v1.17.8  # from c",
    ]


def test_editing_keeps_the_users_comments_quoting_and_order() -> None:
    text = (
        "# ours\n"
        "platform:\n"
        '  kubernetesVersion: "1.32"   # pinned\n'
        "driver:\n"
        "  rhcosVersion: 9.6.1-0\n"
        "  version: 580.1.2   # held back\n"
    )
    result = edited(text, [Field("driver.builds", [{"a": "b"}])], ["driver.rhcosVersion"])
    assert result == (
        "# ours\n"
        "platform:\n"
        '  kubernetesVersion: "1.32"   # pinned\n'
        "driver:\n"
        "  version: 580.1.2   # held back\n"
        "  builds:\n"
        "  - a: b\n"
    )
    # A section the file lacks is added at its end.
    assert edited("a: 1\n", [Field("driver.builds", ["x"])]) == "a: 1\ndriver:\n  builds:\n  - x\n"
