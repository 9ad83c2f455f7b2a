"""The config sections of GPU monitoring: the DCGM exporter, its alerts and its dashboard."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from gpustack.config.field_types import (
    DURATION,
    LABEL_VALUE,
    MAX_DURATION_MS,
    Doc,
    LabelKey,
    LabelValue,
    Name,
    Strict,
    WithResources,
    duration_ms,
)


class DCGMExporter(WithResources):
    components = ("dcgm-exporter",)
    container = "the exporter container"
    resource_defaults = {
        "requests": "cpu `100m`, memory `128Mi`",
        "limits": "memory `512Mi`",
    }
    enabled: bool = Field(
        default=True,
        description=(
            "deploy the DCGM exporter (`false` on GKE clusters whose managed DCGM metrics are on)"
        ),
    )
    # <DCGM version>-<exporter version>; gpu-operator deployments/gpu-operator/values.yaml
    # (a22dbf6) `dcgmExporter.version`, newer than dcgm-exporter's own chart (4.5.3-4.8.2).
    version: Annotated[
        str,
        Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\.[0-9]+\.[0-9]+$"),
        Doc(type="`X.Y.Z-X.Y.Z` (DCGM-exporter)"),
    ] = Field(default="4.6.0-4.8.3", description="image tag, without the `-distroless` suffix")
    monitor: Annotated[
        Literal["auto", "servicemonitor", "podmonitoring", "azure-servicemonitor", "none"],
        Doc(see="DCGM exporter and monitoring"),
    ] = Field(
        default="auto",
        description="how Prometheus finds the exporter; `auto`: the profile's choice",
    )
    # min_length 2: the pattern alone would accept an empty string.
    interval: Annotated[
        str, Field(pattern=DURATION, min_length=2), Doc(type="Prometheus duration")
    ] = Field(
        default="15s",
        description=(
            "scrape interval and the exporter's collection interval, e.g. `1m30s`; longer than zero"
        ),
    )
    monitorLabels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=(
            "extra labels on the ServiceMonitor/PodMonitoring, e.g. `release: "
            "kube-prometheus-stack`"
        ),
    )

    @field_validator("interval")
    @classmethod
    def _positive_interval(cls, interval: str) -> str:
        if duration_ms(interval) == 0:
            raise ValueError("the interval must be longer than zero")
        if duration_ms(interval) > MAX_DURATION_MS:
            raise ValueError("the interval is longer than Prometheus can represent (292 years)")
        return interval


# The alerts gpustack renders (gpustack.build.components.alerts; docs/components.md, "Alert runbooks").
AlertName = Literal[
    "GPUXidError",
    "GPUFallenOffBus",
    "GPUsMissing",
    "GPUDoubleBitECCError",
    "GPURowRemapFailure",
    "GPUsNotAdvertised",
    "GPUThermalThrottling",
    "GPUPowerThrottling",
    "GPUNodeDaemonSetNotRunning",
    "GPUsIdleWhilePodsWait",
    "GPUNodeDriverValidationFailed",
    "GPUNodeToolkitNotReady",
    "GPUNodeCUDANotReady",
    "GPUNodeNoDevicesAdvertised",
]
Severity = Annotated[
    str, Field(pattern=LABEL_VALUE, min_length=1, max_length=63), Doc(type="label value")
]
# A Prometheus duration for a threshold or an alert's `for` (`0s`: at once).
RuleDuration = Annotated[
    str, Field(pattern=DURATION, min_length=2, max_length=32), Doc(type="Prometheus duration")
]


def _positive_duration(field: str, duration: str) -> None:
    if duration_ms(duration) == 0:
        raise ValueError(f"{field} must be longer than zero")
    if duration_ms(duration) > MAX_DURATION_MS:
        raise ValueError(f"{field} is longer than Prometheus can represent (292 years)")


class AlertThresholds(Strict):
    """When each alert fires: levels and how long a condition must last (the alert's `for`)."""

    errorWindow: RuleDuration = Field(
        default="15m",
        description=(
            "GPUXidError, GPUDoubleBitECCError: how long after a new error the alert keeps firing"
        ),
    )
    gpuCountLookback: RuleDuration = Field(
        default="1d",
        description=(
            "GPUsMissing: a node whose exporter reports fewer GPUs than it did within this time "
            "has lost one"
        ),
    )
    notAdvertisedFor: RuleDuration = Field(
        default="10m",
        description="GPUsNotAdvertised: how long a node may advertise fewer GPUs than it has",
    )
    throttledRatio: Annotated[float, Doc(type="number, 0 to 1")] = Field(
        default=0.1,
        gt=0,
        le=1,
        description=(
            "GPUThermalThrottling, GPUPowerThrottling: share of time (0 to 1) a GPU's clocks "
            "are held down that counts as throttled"
        ),
    )
    throttledFor: RuleDuration = Field(
        default="15m", description="GPUThermalThrottling, GPUPowerThrottling: for how long"
    )
    daemonSetFor: RuleDuration = Field(
        default="15m",
        description="GPUNodeDaemonSetNotRunning: how long a GPU node may lack a pod",
    )
    idleUtilization: int = Field(
        default=0,
        ge=0,
        le=100,
        description="GPUsIdleWhilePodsWait: utilisation in percent at or below which a GPU is idle",
    )
    idleFor: RuleDuration = Field(
        default="30m",
        description="GPUsIdleWhilePodsWait: how long GPUs are idle while GPU pods cannot schedule",
    )
    # NVIDIA/gpu-operator v26.7.0 assets/state-node-status-exporter/
    # 0800_prometheus_rule_openshift.yaml: `for: 30m` on each node deployment alert.
    nodeValidationFor: RuleDuration = Field(
        default="30m",
        description=(
            "GPUNodeDriverValidationFailed, GPUNodeToolkitNotReady, GPUNodeCUDANotReady, "
            "GPUNodeNoDevicesAdvertised: how long a node's validation step may fail"
        ),
    )

    @model_validator(mode="after")
    def _positive_durations(self) -> Self:
        for name in ("errorWindow", "gpuCountLookback"):
            _positive_duration(name, getattr(self, name))
        for name in (
            "notAdvertisedFor",
            "throttledFor",
            "daemonSetFor",
            "idleFor",
            "nodeValidationFor",
        ):
            if duration_ms(getattr(self, name)) > MAX_DURATION_MS:
                raise ValueError(f"{name} is longer than Prometheus can represent (292 years)")
        return self


class Alerts(Strict):
    enabled: Annotated[bool | Literal["auto"], Doc(see="GPU alerts")] = Field(
        default="auto",
        description=(
            "render the GPU alerting and recording rules (a PrometheusRule; a ClusterRules with "
            "Google Managed Prometheus); `auto`: with the DCGM exporter and a monitor, but not "
            "with Azure Monitor's (`azure-servicemonitor`), which reads no rule objects"
        ),
    )
    thresholds: AlertThresholds = Field(default_factory=AlertThresholds)
    severity: dict[AlertName, Severity] = Field(
        default_factory=dict,
        description=(
            "`severity` label per alert over gpustack's own (`critical` or `warning`, see the "
            "runbooks), e.g. `{GPUXidError: critical}`"
        ),
    )
    disabled: list[AlertName] = Field(
        default_factory=list, description="alerts left out, e.g. `[GPUsIdleWhilePodsWait]`"
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="extra labels on every alert, for Alertmanager routing, e.g. `team: gpu`",
    )
    ruleLabels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=(
            "extra labels on the rule object, e.g. `release: kube-prometheus-stack` for a "
            "Prometheus `ruleSelector`"
        ),
    )
    runbookURL: Annotated[
        Annotated[str, Field(pattern=r"^https?://[^\s#]+$", max_length=1024)] | None,
        Doc(type="URL", default="none (no `runbook_url` annotation)"),
    ] = Field(
        default=None,
        description=(
            "where the alert runbooks (docs/components.md, Alert runbooks) are published; "
            "each alert links `<runbookURL>#<alert name in lower case>`"
        ),
    )


class Dashboard(Strict):
    enabled: Annotated[bool | Literal["auto"], Doc(see="GPU dashboard")] = Field(
        default="auto",
        description=(
            "render the DCGM Grafana dashboard as a ConfigMap for Grafana's sidecar; `auto`: "
            "with the DCGM exporter and a monitor"
        ),
    )
    labels: Annotated[dict[LabelKey, LabelValue], Doc(default='`grafana_dashboard: "1"`')] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"},
        description=(
            "labels the Grafana sidecar finds dashboards by (kube-prometheus-stack's default "
            '`grafana_dashboard: "1"`); given, they replace the default'
        ),
    )
    namespace: Annotated[Name | None, Doc(default="none (the stack's namespace)")] = Field(
        default=None,
        description=(
            "namespace of the ConfigMap, e.g. Grafana's own (a sidecar watches only its "
            "namespace unless told to search all)"
        ),
    )
    folder: Annotated[str | None, Doc(default="none (the sidecar's default folder)")] = Field(
        default=None,
        max_length=253,
        description="Grafana folder (the sidecar's `grafana_folder` annotation)",
    )
    poolLabel: LabelKey = Field(
        default="nvidia.com/gpu.product",
        description=(
            "node label of the dashboard's pool variable, e.g. `cloud.google.com/gke-nodepool`; "
            "kube-state-metrics must export it (its metric labels allowlist for nodes)"
        ),
    )
