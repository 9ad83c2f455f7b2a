"""kubeconform's command-line flags and gpustack's spelling of each: `translate` writes a
command line spelled kubeconform's way (`-strict`, `-output json`, `-kubernetes-version=1.31.0`)
as validate's own options before they are parsed, and `spelling_note` says where gpustack's
verdict for such a command line differs from kubeconform's. Standard library only: the command
line reads it while it is parsed."""

from __future__ import annotations

KUBECONFORM_DEFAULTS = "--kubeconform-defaults"
# Set by `translate`, once per kubeconform flag on the command line, for the note it gets.
KUBECONFORM_FLAG = "--kubeconform-flag"
# kubeconform's -kubernetes-version default: the newest version (yannh/kubeconform
# pkg/config/config.go, v0.7.0).
MASTER = "master"


# kubeconform's flags (yannh/kubeconform pkg/config/config.go, v0.7.0) and gpustack's spelling of
# each: the switches, then the flags that take a value.
KUBECONFORM_SWITCHES = {
    "-ignore-missing-schemas": "--ignore-missing-schemas",
    "-summary": "--summary",
    "-verbose": "--verbose",
    "-strict": "--strict",
    "-exit-on-error": "--exit-on-error",
    "-h": "--help",
}
KUBECONFORM_VALUES = {
    "-kubernetes-version": "--kubernetes-version",
    "-schema-location": "--schema-location",
    "-skip": "--skip",
    "-reject": "--reject",
    "-ignore-filename-pattern": "--ignore-filename-pattern",
    "-output": "--output",
    "-n": "--jobs",
}
_FALSE = {"false", "0", "f", "F", "FALSE", "False"}  # Go's strconv.ParseBool
# kubeconform's flags about downloading schemas (pkg/config/config.go, v0.7.0): gpustack never
# downloads, so they are taken and left unused (said in the note), not refused.
DOWNLOAD_VALUES = ("-cache",)
DOWNLOAD_SWITCHES = ("-insecure-skip-tls-verify",)


def translate(args: list[str]) -> list[str]:
    """kubeconform's single-dash flags (`-flag`, `-flag value`, `-flag=value`, booleans also
    `-flag=false`) as gpustack's options, each recorded with KUBECONFORM_FLAG (for
    `spelling_note`); a flag's meaning does not depend on its spelling."""
    translated: list[str] = []
    used: list[str] = []
    arguments = iter(args)
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if name in KUBECONFORM_SWITCHES:
            used.append(name)
            if not equals or value not in _FALSE:
                translated.append(KUBECONFORM_SWITCHES[name])
            elif name == "-strict":
                translated.append("--no-strict")
        elif name in DOWNLOAD_SWITCHES:
            used.append(name)
        elif name in DOWNLOAD_VALUES:
            used.append(name)
            if not equals:
                next(arguments, None)
        elif name in KUBECONFORM_VALUES:
            used.append(name)
            translated.append(KUBECONFORM_VALUES[name])
            # With no value after it, the option is left without one: the parser says so.
            following = value if equals else next(arguments, None)
            if following is not None:
                translated.append(following)
        else:
            translated.append(argument)
    return [f"{KUBECONFORM_FLAG}={name}" for name in used] + translated


def spelling_note(
    flags: list[str],
    kubeconform_defaults: bool,
    strict: bool | None,
    lint: bool,
    builtin: bool,
    locations_given: bool,
    version_from_config: str | None,
) -> str | None:
    """What a command line spelled kubeconform's way gets where gpustack's defaults are not
    kubeconform's (yannh/kubeconform pkg/config/config.go, v0.7.0: not strict, no lint rules,
    schemas that do not require metadata.name, only the `default` location, Kubernetes
    `master`, and -skip and -reject each a single value, the last one kept), and the download
    flags it leaves unused; None when nothing the command line left open differs (or
    --kubeconform-defaults asks for kubeconform's)."""
    unused = [flag for flag in (*DOWNLOAD_VALUES, *DOWNLOAD_SWITCHES) if flag in flags]
    ignored = f"{' and '.join(unused)} unused (gpustack never downloads schemas)"
    if not flags or kubeconform_defaults:
        return ignored if unused else None
    differences = []
    if strict is None:
        differences.append("strict unless -strict=false")
    if lint:
        differences.append("lint rules unless --no-lint")
    if builtin:
        differences.append("metadata.name required")
    if not locations_given:
        differences.append("gpustack's CRD schemas after the core kinds'")
    if version_from_config is not None:
        differences.append(
            f"Kubernetes {version_from_config} of ./gpustack.yaml "
            f"(-kubernetes-version {MASTER}: the newest)"
        )
    for flag in ("-skip", "-reject"):
        if flags.count(flag) > 1:
            differences.append(f"the kinds of every {flag} (kubeconform keeps the last)")
    verdict = (
        "gpustack's verdict for kubeconform's flags: "
        + ", ".join(differences)
        + f"; {KUBECONFORM_DEFAULTS} gives kubeconform's"
    )
    return "; ".join([*([verdict] if differences else []), *([ignored] if unused else [])]) or None
