"""A CustomResourceDefinition among the inputs gives its custom resources their schema."""

from __future__ import annotations

import json

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              port: {x-kubernetes-int-or-string: true}
              note: {type: string, nullable: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
"""


def widget(spec: str, version: str = "v1", name: str = "w") -> str:
    return f"apiVersion: example.com/{version}\nkind: Widget\nmetadata:\n  name: {name}\nspec: {spec}\n"


def statuses(cli, tmp_path, *documents: str, options=()) -> list[tuple[str, str]]:
    manifest = tmp_path / "widgets.yaml"
    manifest.write_text("---\n".join(documents))
    result = cli(
        "validate",
        "-o",
        "json",
        "--verbose",
        "--no-lint",
        "--kubernetes-version",
        "1.31",
        *options,
        manifest,
    )
    return [
        (entry["name"], entry["status"].removeprefix("status").lower())
        for entry in json.loads(result.stdout)["resources"]
    ]


def test_custom_resources_are_checked_against_the_crd_beside_them(cli, tmp_path):
    assert statuses(
        cli,
        tmp_path,
        CRD,
        widget("{size: 2, port: http, note: null, extra: {anything: [1]}}", name="good"),
        widget("{size: 2, port: 8080}", name="int-port"),
        widget("{size: 0}", name="too-small"),
        widget("{size: 2, colour: red}", name="unknown-field"),
        widget("{size: 2}", version="v1alpha1", name="not-served"),
        widget("{port: 80}", name="no-size"),
    ) == [
        ("widgets.example.com", "valid"),
        ("good", "valid"),
        ("int-port", "valid"),
        ("too-small", "invalid"),
        ("unknown-field", "invalid"),
        ("not-served", "error"),
        ("no-size", "invalid"),
    ]


def test_the_crd_may_come_after_its_resources_or_in_another_file(cli, tmp_path):
    (tmp_path / "a-widget.yaml").write_text(widget("{size: 1, colour: red}"))
    (tmp_path / "z-crd.yaml").write_text(CRD)
    result = cli("validate", "--no-lint", "--kubernetes-version", "1.31", tmp_path)
    assert result.stdout == (
        f"{tmp_path}/a-widget.yaml - Widget w is invalid: spec: Additional properties are not "
        "allowed ('colour' was unexpected) (line 5, column 17)\n"
    )


def test_without_strict_unknown_fields_are_accepted(cli, tmp_path):
    assert statuses(
        cli, tmp_path, CRD, widget("{size: 2, colour: red}"), options=["--no-strict"]
    ) == [("widgets.example.com", "valid"), ("w", "valid")]


def test_a_schema_location_that_knows_the_kind_wins(cli, tmp_path):
    folder = tmp_path / "schemas" / "example.com"
    folder.mkdir(parents=True)
    (folder / "widget_v1.json").write_text(json.dumps({"type": "object"}))  # accepts anything
    template = f"{tmp_path}/schemas/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json"
    assert statuses(
        cli,
        tmp_path,
        CRD,
        widget("{size: 0}"),
        options=["--schema-location", "default", "--schema-location", template],
    ) == [
        ("widgets.example.com", "valid"),
        ("w", "valid"),
    ]


def test_conversion_follows_openapi2jsonschema():
    from gpustack.validation.crds import convert

    schema = convert(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "x-kubernetes-preserve-unknown-fields": False,
                }
            },
        },
        "example.com/v1",
        "Widget",
        strict=True,
    )
    assert schema["additionalProperties"] is False
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert schema["properties"]["kind"] == {"type": "string", "enum": ["Widget"]}
    assert schema["properties"]["apiVersion"] == {"type": "string", "enum": ["example.com/v1"]}
    assert schema["properties"]["metadata"] == {"type": "object"}
    loose = convert(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {}}}},
        "example.com/v1",
        "Widget",
        strict=False,
    )
    assert (
        "additionalProperties" not in loose
        and "additionalProperties" not in loose["properties"]["spec"]
    )
