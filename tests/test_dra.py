"""`gpuAllocation: dra`: NVIDIA's DRA driver for GPUs in place of the device plugin.

The expected values are facts of the driver's Helm chart and docs at the pinned version
(kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, deployments/helm/dra-driver-nvidia-gpu, docs/),
each cited where it is asserted, and of k8s-driver-manager v0.12.0 for the deploy label.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_manifest, stack_for

from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.validation import lint

DRA_OUT = ROOT / "out" / "kubeadm-dra"
# values.yaml image.repository, and the tag "v" + Chart.yaml appVersion 0.4.1.
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
KUBELET_PLUGIN = "dra-driver-nvidia-gpu-kubelet-plugin"

Objects = list[dict[str, Any]]


def dra(**settings: Any) -> dict[str, Any]:
    """Config sections of a DRA cluster at Kubernetes 1.34 with `settings` over them."""
    sections: dict[str, Any] = {
        "platform": {"profile": "kubeadm", "kubernetesVersion": "1.34"},
        "gpuAllocation": "dra",
    }
    for key, value in settings.items():
        if isinstance(value, dict) and isinstance(sections.get(key), dict):
            sections[key] = {**sections[key], **value}
        else:
            sections[key] = value
    return sections


def objects_of(tmp_path: Path, profile: str = "kubeadm", **settings: Any) -> Objects:
    return render(stack_for(tmp_path, profile, **dra(**settings))).objects


def named(objects: Objects, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def containers(workload: dict[str, Any], key: str = "containers") -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in workload["spec"]["template"]["spec"].get(key, [])}


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def host_paths(workload: dict[str, Any]) -> dict[str, str]:
    return {
        v["name"]: v["hostPath"]["path"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    }


def refusal(tmp_path: Path, profile: str = "kubeadm", **settings: Any) -> UserError:
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, profile, **dra(**settings))
    return raised.value


# --- The committed example ---------------------------------------------------------------------


def test_the_dra_example_validates_strictly_and_lints_clean_at_1_34(cli):
    result = cli("validate", "--summary", "--kubernetes-version", "1.34", DRA_OUT)
    assert result.exit_code == 0, result.output
    assert ", Invalid: 0, Errors: 0" in result.stdout
    kinds = {read_manifest(path.read_text())["kind"] for path in DRA_OUT.glob("*.yaml")}
    assert {"DeviceClass", "ResourceClaimTemplate", "ValidatingAdmissionPolicy"} <= kinds


@pytest.mark.parametrize(
    ("file", "old", "new"),
    [
        ("deviceclass-gpu.nvidia.com.yaml", "  selectors:", "  selector:"),
        ("resourceclaimtemplate-*.yaml", "deviceClassName:", "deviceClass:"),
    ],
)
def test_deviceclass_and_claim_template_are_checked_against_the_kubernetes_schemas(
    cli, tmp_path, file, old, new
):
    """Strict schemas for resource.k8s.io/v1 at 1.34 (kubernetes-validate): a misspelled field
    of either kind is an error, so the example's passing means something."""
    folder = tmp_path / "kubeadm-dra"
    shutil.copytree(DRA_OUT, folder)
    path = next(folder.glob(file))
    path.write_text(path.read_text().replace(old, new))
    result = cli("validate", "--kubernetes-version", "1.34", folder)
    assert result.exit_code == 1
    assert path.name in result.stdout and "is invalid" in result.stdout


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_the_resource_api_version_follows_the_target_kubernetes_version(tmp_path, version):
    """No live lookup: resource.k8s.io/v1 from 1.34, where DRA is GA."""
    objects = objects_of(
        tmp_path, platform={"kubernetesVersion": version}, smokeTest={"enabled": True}
    )
    for kind in ("DeviceClass", "ResourceClaimTemplate"):
        assert {o["apiVersion"] for o in objects if o["kind"] == kind} == {"resource.k8s.io/v1"}
    assert lint.run(objects, version) == []


# --- What is rendered, against the chart -------------------------------------------------------


def test_the_device_plugin_gives_way_and_the_rest_of_the_stack_stays(tmp_path):
    objects = objects_of(tmp_path, smokeTest={"enabled": True})
    daemonsets = named(objects, "DaemonSet")
    assert "nvidia-device-plugin" not in daemonsets
    assert not any("mps-control-daemon" in name for name in daemonsets)
    assert "nvidia-device-plugin-config" not in named(objects, "ConfigMap")
    assert {KUBELET_PLUGIN, "gpu-feature-discovery", "nfd-worker", "nvidia-dcgm-exporter"} <= set(
        daemonsets
    )
    validation = containers(daemonsets["nvidia-operator-validator"], "initContainers")
    assert "plugin-validation" not in validation  # nothing advertises nvidia.com/gpu to check


def test_device_classes_carry_the_charts_selectors(tmp_path):
    classes = named(objects_of(tmp_path, dra={"computeDomains": {"enabled": True}}), "DeviceClass")
    expressions = {
        name: c["spec"]["selectors"][0]["cel"]["expression"] for name, c in classes.items()
    }
    # templates/deviceclass-*.yaml at v0.4.1.
    assert expressions == {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig'",
        "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'vfio'",
        "compute-domain-daemon.nvidia.com": "device.driver == 'compute-domain.nvidia.com' && "
        "device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
        "compute-domain-default-channel.nvidia.com": "device.driver == "
        "'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == "
        "'channel' && device.attributes['compute-domain.nvidia.com'].id == 0",
    }
    # deviceclass-gpu.yaml names extendedResourceName on resource.k8s.io/v1; at 1.34 the
    # DRAExtendedResource gate is off and the API server would drop it (below).
    assert "extendedResourceName" not in classes["gpu.nvidia.com"]["spec"]


@pytest.mark.parametrize(
    ("version", "gates", "served"),
    [
        ("1.34", {}, False),
        ("1.35", {}, False),
        ("1.35", {"DRAExtendedResource": True}, True),
        ("1.36", {}, True),
        ("1.36", {"DRAExtendedResource": False}, False),
        ("1.37", {}, True),
    ],
)
def test_extended_resource_name_only_where_the_api_server_keeps_it(
    tmp_path, version, gates, served
):
    """KEP-5004: DeviceClass.spec.extendedResourceName is dropped by an API server whose
    DRAExtendedResource gate is off (alpha and off in 1.34 and 1.35, beta and on from 1.36,
    kubernetes pkg/features); a field Git holds and the cluster drops keeps Argo CD OutOfSync
    and Flux reporting drift for ever. It is rendered where the gate is on: by the release's
    default or as platform.featureGates says."""
    platform = {"kubernetesVersion": version, "featureGates": gates}
    classes = named(objects_of(tmp_path, platform=platform), "DeviceClass")
    spec = classes["gpu.nvidia.com"]["spec"]
    assert ("extendedResourceName" in spec) is served
    if served:
        assert spec["extendedResourceName"] == "nvidia.com/gpu"
    # The other classes never name one (the chart's deviceclass-mig.yaml, -vfio.yaml).
    assert not any(
        "extendedResourceName" in c["spec"] for n, c in classes.items() if n != "gpu.nvidia.com"
    )


@pytest.mark.parametrize(("version", "pending"), [("1.35", True), ("1.36", False)])
def test_a_gpu_limit_on_dra_nodes_is_served_where_the_device_class_names_it(
    tmp_path, version, pending
):
    """A pod's `nvidia.com/gpu` limit on DRA-only nodes stays Pending unless a DeviceClass with
    that extendedResourceName answers it (KEP-5004): lint says so where none does."""
    objects = objects_of(tmp_path, platform={"kubernetesVersion": version})
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "cuda",
                            "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                }
            }
        },
    }
    rules = [f.rule for f in lint.run([*objects, job], version)]
    assert ("gpu-resource-on-dra" in rules) is pending


def test_the_dcgm_exporter_ties_dra_gpus_to_their_pods(tmp_path):
    """dcgm-exporter's chart with kubernetesDRA.enabled (NVIDIA/dcgm-exporter deployment/
    templates/daemonset.yaml, clusterrole.yaml, serviceaccount.yaml, d5e5f51): DRA mode on
    (KUBERNETES_ENABLE_DRA), an API token, and read access to pods and ResourceSlices, without
    which the GPUs a ResourceClaim hands out carry no pod labels."""
    objects = objects_of(tmp_path)
    exporter = named(objects, "DaemonSet")["nvidia-dcgm-exporter"]
    (container,) = containers(exporter).values()
    assert env(container)["KUBERNETES_ENABLE_DRA"] == "true"
    spec = exporter["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    token = mounts["/var/run/secrets/kubernetes.io/serviceaccount"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == token]
    sources = volume["projected"]["sources"]
    assert any("serviceAccountToken" in source for source in sources)
    role = named(objects, "ClusterRole")["nvidia-dcgm-exporter"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for verb in ("get", "list", "watch"):
        assert ("resource.k8s.io", "resourceslices", verb) in granted
        assert ("", "pods", verb) in granted
    binding = named(objects, "ClusterRoleBinding")["nvidia-dcgm-exporter"]
    assert binding["roleRef"]["name"] == "nvidia-dcgm-exporter"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": spec["serviceAccountName"], "namespace": "gpu-system"}
    ]
    # Without DRA the exporter reaches no API server: no token, no role.
    plain = objects_of(tmp_path, gpuAllocation="device-plugin")
    exporter = named(plain, "DaemonSet")["nvidia-dcgm-exporter"]
    (container,) = containers(exporter).values()
    assert "KUBERNETES_ENABLE_DRA" not in env(container)
    assert not any("serviceaccount" in m["mountPath"] for m in container["volumeMounts"])
    assert "nvidia-dcgm-exporter" not in named(plain, "ClusterRole")


def test_a_kubernetes_gate_that_changes_nothing_is_refused(tmp_path):
    problem = refusal(
        tmp_path,
        platform={"featureGates": {"DRAExtendedResource": True}},
        gpuAllocation="device-plugin",
    )
    assert problem.field == "platform.featureGates.DRAExtendedResource"
    assert "would change nothing" in problem.message
    locked = refusal(
        tmp_path,
        platform={"kubernetesVersion": "1.37", "featureGates": {"DRAExtendedResource": False}},
    )
    assert "locked on" in locked.message


def test_the_kubelet_plugin_runs_as_the_chart_runs_it(tmp_path):
    objects = objects_of(tmp_path, dra={"computeDomains": {"enabled": True}})
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    spec = plugin["spec"]["template"]["spec"]
    running = containers(plugin)
    # kubeletplugin.yaml: containers compute-domains and gpus, each its binary under bash -c.
    assert list(running) == ["compute-domains", "gpus"]
    assert running["gpus"]["args"][0].endswith("gpu-kubelet-plugin -v $(LOG_VERBOSITY)")
    assert running["compute-domains"]["args"][0].endswith(
        "compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"
    )
    assert {c["image"] for c in running.values()} == {IMAGE}
    assert spec["serviceAccountName"] == "dra-driver-nvidia-gpu-service-account-kubeletplugin"
    init = containers(plugin, "initContainers")["init-container"]
    assert init["command"] == ["bash", "/usr/bin/kubelet-plugin-prestart.sh"]
    gpus = env(running["gpus"])
    # values.yaml nvidiaDriverRoot "/" for a host driver; healthcheckPort 51516 / 51515;
    # metrics endpoints :8080 / :8081; logVerbosity "4".
    assert gpus["NVIDIA_DRIVER_ROOT"] == "/"
    assert gpus["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert gpus["CDI_ROOT"] == "/var/run/cdi"
    assert gpus["HEALTHCHECK_PORT"] == "51516"
    assert gpus["HTTP_ENDPOINT"] == ":8080"
    assert gpus["LOG_VERBOSITY"] == "4"
    assert gpus["IMAGE_NAME"] == IMAGE
    assert gpus["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins"
    assert gpus["KUBELET_REGISTRAR_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins_registry"
    assert env(running["compute-domains"])["HEALTHCHECK_PORT"] == "51515"
    assert env(running["compute-domains"])["HTTP_ENDPOINT"] == ":8081"
    assert running["gpus"]["startupProbe"]["grpc"] == {"port": 51516, "service": "liveness"}
    assert (
        host_paths(plugin).items()
        >= {
            "plugins-registry": "/var/lib/kubelet/plugins_registry",
            "plugins": "/var/lib/kubelet/plugins",
            "cdi": "/var/run/cdi",
            "driver-root": "/",
            "driver-root-parent": "/",
        }.items()
    )
    assert mounts(running["gpus"])["driver-root"] == "/driver-root"
    plugins_mount = next(m for m in running["gpus"]["volumeMounts"] if m["name"] == "plugins")
    assert plugins_mount["mountPropagation"] == "Bidirectional"
    # Like every GPU DaemonSet gpustack renders: after the validator's toolkit-ready.
    assert next(iter(containers(plugin, "initContainers"))) == "toolkit-validation"
    assert "runtimeClassName" not in spec  # runc, as the chart runs it


def test_driver_root_and_kubelet_root_come_from_the_platform(tmp_path):
    plugin = named(objects_of(tmp_path, driver={"mode": "container"}), "DaemonSet")[KUBELET_PLUGIN]
    # The driver container's root (values.yaml: "typically /run/nvidia/driver") and its parent.
    assert env(containers(plugin)["gpus"])["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert host_paths(plugin)["driver-root-parent"] == "/run/nvidia"
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "site.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
        "metadata: {name: site, description: kubelet on /data}\n"
        "facts: {kubeletRoot: /data/kubelet}\n"
    )
    from gpustack.resolve.load import load_stack

    config = tmp_path / "site-cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        'platform: {profile: site, kubernetesVersion: "1.34"}\ngpuAllocation: dra\n'
    )
    site = named(render(load_stack(config, profiles_dir=profiles)).objects, "DaemonSet")
    assert host_paths(site[KUBELET_PLUGIN])["plugins"] == "/data/kubelet/plugins"


def test_the_controller_and_its_rbac_come_with_compute_domains(tmp_path):
    without = objects_of(tmp_path)
    assert "dra-driver-nvidia-gpu-controller" not in named(without, "Deployment")
    objects = objects_of(tmp_path, dra={"computeDomains": {"enabled": True}})
    controller = named(objects, "Deployment")["dra-driver-nvidia-gpu-controller"]
    container = containers(controller)["compute-domain"]
    # controller.yaml: the binary and its verbosity flag.
    assert container["command"] == ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"]
    assert env(container)["LEADER_ELECTION_LEASE_LOCK_NAME"] == "dra-driver-nvidia-gpu-controller"
    roles = named(objects, "ClusterRole")
    # rbac-controller.yaml: the controller writes ResourceClaimTemplates for each domain.
    assert {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaimtemplates"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    } in roles["dra-driver-nvidia-gpu-clusterrole-controller"]["rules"]
    # rbac-kubeletplugin.yaml: the plugins publish their ResourceSlices.
    assert {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    } in roles["dra-driver-nvidia-gpu-clusterrole-kubeletplugin"]["rules"]
    assert "compute-domain-daemon-role" in roles  # rbac-compute-domain-daemon.yaml
    crds = named(objects, "CustomResourceDefinition")
    for name, kind in (
        ("computedomains.resource.nvidia.com", "ComputeDomain"),
        ("computedomaincliques.resource.nvidia.com", "ComputeDomainClique"),
    ):
        assert crds[name]["spec"]["names"]["kind"] == kind
        assert [v["name"] for v in crds[name]["spec"]["versions"]] == ["v1beta1"]


def test_a_compute_domain_is_checked_against_the_rendered_crd(cli, tmp_path):
    """The CRDs' schemas are the chart's: the example ComputeDomain of docs/install.md passes,
    and an allocationMode the CRD does not know is refused."""
    folder = tmp_path / "kubeadm-dra"
    shutil.copytree(DRA_OUT, folder)
    domain = (
        "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\n"
        "metadata: {name: imex-channel-injection, namespace: default}\n"
        "spec:\n  numNodes: 0\n  channel:\n    resourceClaimTemplate: {name: imex-channel-0}\n"
    )
    (folder / "domain.yaml").write_text(domain)
    assert cli("validate", "--kubernetes-version", "1.34", folder).exit_code == 0
    (folder / "domain.yaml").write_text(domain + "    allocationMode: Some\n")
    result = cli("validate", "--kubernetes-version", "1.34", folder)
    assert result.exit_code == 1 and "domain.yaml" in result.stdout


def test_feature_gates_reach_every_driver_container(tmp_path):
    objects = objects_of(
        tmp_path,
        dra={"computeDomains": {"enabled": True}, "featureGates": {"MPSSupport": True}},
    )
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    controller = named(objects, "Deployment")["dra-driver-nvidia-gpu-controller"]
    for container in [*containers(plugin).values(), *containers(controller).values()]:
        assert env(container)["FEATURE_GATES"] == "MPSSupport=true"
    # rbac-kubeletplugin.yaml: with MPSSupport the gpus plugin runs MPS daemons as Deployments.
    role = named(objects, "Role")["dra-driver-nvidia-gpu-role-kubeletplugin"]
    assert any(rule["resources"] == ["deployments"] for rule in role["rules"])


def test_the_admission_policy_restricts_the_kubelet_plugins_account(tmp_path):
    objects = objects_of(tmp_path)
    policy = named(objects, "ValidatingAdmissionPolicy")[
        "resourceslices-policy-dra-driver-nvidia-gpu"
    ]
    condition = policy["spec"]["matchConditions"][0]["expression"]
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    account = plugin["spec"]["template"]["spec"]["serviceAccountName"]
    assert condition == f'request.userInfo.username == "system:serviceaccount:gpu-system:{account}"'
    binding = named(objects, "ValidatingAdmissionPolicyBinding")[policy["metadata"]["name"]]
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_driver_upgrades_take_the_kubelet_plugin_off_the_node(tmp_path):
    """k8s-driver-manager v0.12.0 (cmd/driver-manager/main.go) pauses
    nvidia.com/gpu.deploy.dra-driver and waits for app=nvidia-dra-driver-kubelet-plugin."""
    stack = stack_for(tmp_path, "kubeadm", **dra(driver={"mode": "container"}))
    rendering = render(stack)
    plugin = named(rendering.objects, "DaemonSet")[KUBELET_PLUGIN]
    template = plugin["spec"]["template"]
    assert template["metadata"]["labels"]["app"] == "nvidia-dra-driver-kubelet-plugin"
    terms = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    deploy = [
        e for e in terms[0]["matchExpressions"] if e["key"].startswith("nvidia.com/gpu.deploy")
    ]
    assert deploy[0]["key"] == "nvidia.com/gpu.deploy.dra-driver"
    assert "paused-for-driver-upgrade" in deploy[0]["values"]
    assert rendering.node_labels["nvidia.com/gpu.deploy.dra-driver"] == "true"


def test_a_device_plugin_cluster_never_registers_the_dra_deploy_label():
    """On a node labelled gpu.deploy.dra-driver k8s-driver-manager takes its DRA path."""
    for path in (ROOT / "out" / "kubeadm-driver-container").rglob("*"):
        if path.is_file():
            assert "gpu.deploy.dra-driver" not in path.read_text()


def test_the_smoke_test_claims_its_gpu(tmp_path):
    objects = objects_of(tmp_path, smokeTest={"enabled": True})
    job = next(o for o in objects if o["kind"] == "Job")
    template = named(objects, "ResourceClaimTemplate")[job["metadata"]["name"]]
    # docs/install.md's single-gpu template: one request of DeviceClass gpu.nvidia.com.
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    ]
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    container = pod["containers"][0]
    assert container["resources"] == {"claims": [{"name": "gpu"}]}
    assert container["command"] == ["nvidia-smi"]
    assert "runtimeClassName" not in pod
    # The template is applied before the Job.
    kinds = [o["kind"] for o in objects]
    assert kinds.index("ResourceClaimTemplate") < kinds.index("Job")


def test_cdi_is_on_for_the_runtime(tmp_path):
    rendering = render(stack_for(tmp_path, "kubeadm", **dra()))
    assert "enable_cdi = true" in rendering.node_files["99-nvidia.toml"]
    toolkit = render(stack_for(tmp_path, "kubeadm", **dra(driver={"mode": "container"})))
    daemonset = named(toolkit.objects, "DaemonSet")["nvidia-container-toolkit-daemonset"]
    assert env(containers(daemonset)["nvidia-container-toolkit-ctr"])["CDI_ENABLED"] == "true"


def test_compute_domains_beside_the_device_plugin(tmp_path):
    """The chart's other supported mix: the device plugin for GPUs, DRA for ComputeDomains."""
    objects = objects_of(
        tmp_path,
        devicePlugin={"enabled": True},
        dra={"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
    )
    assert "nvidia-device-plugin" in named(objects, "DaemonSet")
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    assert list(containers(plugin)) == ["compute-domains"]
    assert "gpu.nvidia.com" not in named(objects, "DeviceClass")
    assert lint.run(objects, "1.34") == []


# --- What is refused ---------------------------------------------------------------------------


def test_kubernetes_below_the_drivers_minimum_is_refused(tmp_path):
    problem = refusal(tmp_path, platform={"kubernetesVersion": "1.33"})
    assert problem.field == "platform.kubernetesVersion"
    assert "1.34.2" in problem.message  # docs/prerequisites.md


def test_device_plugin_and_dra_on_the_same_nodes_is_refused_at_its_line(cli, tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        'platform: {profile: kubeadm, kubernetesVersion: "1.34"}\n'
        "gpuAllocation: dra\n"
        "devicePlugin:\n  enabled: true\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:7:12" in result.output and "devicePlugin.enabled" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_dra_beside_gkes_own_device_plugin_is_refused(tmp_path):
    problem = refusal(tmp_path, "gke-cos", platform={"profile": "gke-cos"})
    assert problem.field == "gpuAllocation"


@pytest.mark.parametrize(
    ("gates", "field"),
    [
        # featuregates.go ValidateFeatureGates, v0.4.1.
        ({"IMEXDaemonsWithDNSNames": False}, "dra.featureGates.IMEXDaemonsWithDNSNames"),
        ({"DeviceMetadata": True}, "dra.featureGates.DeviceMetadata"),
        ({"DynamicMIG": True, "MPSSupport": True}, "dra.featureGates.MPSSupport"),
        (
            {"PassthroughSupport": True, "NVMLDeviceHealthCheck": True},
            "dra.featureGates.NVMLDeviceHealthCheck",
        ),
    ],
)
def test_feature_gates_the_driver_refuses_are_refused(tmp_path, gates, field):
    problem = refusal(tmp_path, dra={"featureGates": gates})
    assert problem.field == field


def test_dynamic_mig_needs_partitionable_devices_before_1_36(tmp_path):
    """feature-gates.md: DynamicMIG needs DRAPartitionableDevices on kube-apiserver and
    kube-scheduler on Kubernetes 1.34 and 1.35, on by default from 1.36."""
    problem = refusal(tmp_path, dra={"featureGates": {"DynamicMIG": True}})
    assert problem.field == "dra.featureGates.DynamicMIG"
    assert "DRAPartitionableDevices" in problem.message
    declared = {
        "featureGates": {"DynamicMIG": True},
        "clusterFeatureGates": ["DRAPartitionableDevices"],
    }
    assert objects_of(tmp_path, dra=declared)
    assert objects_of(
        tmp_path, platform={"kubernetesVersion": "1.36"}, dra={"featureGates": {"DynamicMIG": True}}
    )


def test_compute_domains_below_their_driver_minimum_are_refused(tmp_path):
    """docs/prerequisites.md: ComputeDomains need driver 570.158.01 or later."""
    problem = refusal(
        tmp_path,
        driver={"mode": "container", "version": "570.148.08"},
        dra={"computeDomains": {"enabled": True}},
    )
    assert problem.field == "driver.version"
    assert objects_of(
        tmp_path,
        driver={"mode": "container", "version": "570.158.01"},
        dra={"computeDomains": {"enabled": True}},
    )


def test_an_extended_resource_for_the_smoke_test_is_refused(tmp_path):
    problem = refusal(tmp_path, smokeTest={"resource": "nvidia.com/gpu"})
    assert problem.field == "smokeTest.resource"


def test_a_kubelet_plugin_that_does_not_wait_for_the_validator_is_reported(tmp_path):
    objects = objects_of(tmp_path)
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    init = plugin["spec"]["template"]["spec"]["initContainers"]
    init[:] = [c for c in init if c["name"] != "toolkit-validation"]
    assert [f.rule for f in lint.run(objects, "1.34")] == ["validation-not-awaited"]


def test_no_alert_expects_gpus_in_node_capacity(tmp_path):
    """Under DRA nodes advertise no nvidia.com/gpu: an alert comparing it would always fire."""
    rules = named(objects_of(tmp_path), "PrometheusRule")["gpustack-gpu-alerts"]
    alerts = {r.get("alert") for group in rules["spec"]["groups"] for r in group["rules"]}
    assert "GPUsNotAdvertised" not in alerts and "GPUXidError" in alerts


RESOURCE_OBJECTS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 1}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
"""


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_resource_api_objects_have_strict_schemas_at_every_dra_version(cli, version):
    """kubernetes-validate ships resource.k8s.io/v1 for every version DRA is refused below:
    the four kinds validate, and an unknown field in each is an error."""
    result = cli(
        "validate", "--summary", "--kubernetes-version", version, "-", input=RESOURCE_OBJECTS
    )
    assert result.exit_code == 0, result.output
    assert "Valid: 4, Invalid: 0, Errors: 0, Skipped: 0" in result.stdout
    for kind in ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim", "ResourceSlice"):
        documents = RESOURCE_OBJECTS.split("---\n")
        bad = next(d for d in documents if f"kind: {kind}\n" in d) + "bogus: 1\n"
        result = cli("validate", "--kubernetes-version", version, "-", input=bad)
        assert result.exit_code == 1, (kind, result.output)


def test_openshift_binds_the_charts_sccs(tmp_path):
    """rbac-kubeletplugin.yaml and rbac-compute-domain-daemon.yaml on OpenShift: SCC privileged
    for the kubelet plugin, anyuid for the IMEX daemons; the driver container's root there."""
    objects = objects_of(
        tmp_path,
        "openshift",
        platform={"profile": "openshift", "kubernetesVersion": "1.34"},
        dra={"computeDomains": {"enabled": True}},
    )
    bindings = named(objects, "ClusterRoleBinding")
    privileged = bindings["dra-driver-nvidia-gpu-openshift-privileged-role-binding-kubeletplugin"]
    assert privileged["roleRef"]["name"] == "system:openshift:scc:privileged"
    anyuid = bindings["compute-domain-daemon-openshift-anyuid-role-binding"]
    assert anyuid["roleRef"]["name"] == "system:openshift:scc:anyuid"
    assert anyuid["subjects"][0]["name"] == "compute-domain-daemon-service-account"
    plugin = named(objects, "DaemonSet")[KUBELET_PLUGIN]
    assert env(containers(plugin)["gpus"])["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"


# The project's strict schemas for the driver's custom resources (the `gpustack` schema
# location), so that `gpustack validate` checks a user's ComputeDomain without the CRD in its
# input: the rendered CRDs converted as the validator converts any CRD.
CRD_SCHEMA_FILES = {
    "ComputeDomain": ROOT / "schemas" / "resource.nvidia.com" / "computedomain_v1beta1.json",
    "ComputeDomainClique": ROOT
    / "schemas"
    / "resource.nvidia.com"
    / "computedomainclique_v1beta1.json",
}


def expected_crd_schema(kind: str) -> str:
    import json

    from gpustack.build.components import dra_driver
    from gpustack.validation import crds

    crd = next(
        c for c in dra_driver.custom_resource_definitions() if c["spec"]["names"]["kind"] == kind
    )
    schema = crds.schemas(crd, strict=True)[("resource.nvidia.com/v1beta1", kind)]
    assert isinstance(schema, dict)
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{kind} (resource.nvidia.com/v1beta1)",
        "description": f"NVIDIA DRA driver {kind}: the CRD of kubernetes-sigs/"
        f"dra-driver-nvidia-gpu v0.4.1 (deployments/helm/dra-driver-nvidia-gpu/crds/), as "
        "gpustack renders it, converted strictly as kubeconform converts a CRD.",
        **schema,
    }
    return json.dumps(document, indent=2) + "\n"


@pytest.mark.parametrize("kind", sorted(CRD_SCHEMA_FILES))
def test_the_compute_domain_schemas_match_the_rendered_crds(kind):
    assert CRD_SCHEMA_FILES[kind].read_text() == expected_crd_schema(kind), (
        f"{CRD_SCHEMA_FILES[kind]} is stale: run `python tests/test_dra.py` from the repository root"
    )


def test_a_users_compute_domain_validates_without_the_crd(cli):
    domain = (
        "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\n"
        "metadata: {name: imex, namespace: default}\n"
        "spec:\n  channel:\n    resourceClaimTemplate: {name: imex-channel-0}\n"
    )
    assert cli("validate", "--kubernetes-version", "1.34", "-", input=domain).exit_code == 0
    wrong = domain.replace("resourceClaimTemplate:", "resourceClaimTemplates:")
    assert cli("validate", "--kubernetes-version", "1.34", "-", input=wrong).exit_code == 1


if __name__ == "__main__":
    for kind, path in CRD_SCHEMA_FILES.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(expected_crd_schema(kind))
