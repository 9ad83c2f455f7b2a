"""What the monitors watch: the exporters' DaemonSet names, the metrics they serve and the label
that names a sample's node. The exporters (components/dcgm_exporter.py,
components/node_status_exporter.py) publish them; the alerts and the dashboard query them.
"""

from __future__ import annotations

from gpustack.resolve.stack import Stack

DCGM_EXPORTER = "nvidia-dcgm-exporter"
# NVIDIA's DRA driver's kubelet plugin (its chart's name, templates/_helpers.tpl, v0.4.1): the
# alerts watch its DaemonSet and tell DRA nodes by its pods.
DRA_KUBELET_PLUGIN = "dra-driver-nvidia-gpu-kubelet-plugin"
# The label every exporter sample gets with the name of its node (the exporter's monitors in
# components/dcgm_exporter.py set it from the scraped pod's node): alerts and the dashboard join on it with kube-state-metrics' `node`.
# The exporter's own host label changed case (`Hostname`, `hostname` from dcgm-exporter d5e5f51,
# #655), so gpustack does not rely on it.
NODE_LABEL = "node"

# The counters the exporter collects: (DCGM field, Prometheus type, help). The set follows the
# exporter's own default list (etc/default-counters.csv); help texts must not contain commas,
# since each line is read as exactly three comma-separated fields.
COUNTERS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "Clocks",
        (
            ("DCGM_FI_DEV_SM_CLOCK", "gauge", "Streaming multiprocessor clock in MHz."),
            ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock in MHz."),
        ),
    ),
    (
        "Temperature",
        (
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU die temperature in degrees Celsius."),
            ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "GPU memory temperature in degrees Celsius."),
        ),
    ),
    (
        "Power",
        (
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power drawn right now in watts."),
            (
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "counter",
                "Energy used since the driver loaded in millijoules.",
            ),
        ),
    ),
    (
        "Utilisation (the sampling window depends on the GPU model)",
        (
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "Share of time a kernel was running in percent."),
            (
                "DCGM_FI_DEV_MEM_COPY_UTIL",
                "gauge",
                "Share of time device memory was read or written in percent.",
            ),
            ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Video encoder busy time in percent."),
            ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Video decoder busy time in percent."),
        ),
    ),
    (
        "Framebuffer memory",
        (
            ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory not in use in MiB."),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory in use in MiB."),
            ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory the driver keeps in MiB."),
        ),
    ),
    (
        "Errors and health",
        (
            # "Value of the last XID error encountered" (etc/default-counters.csv): a gauge that
            # keeps the last code, so an alert looks for a new value, not for a nonzero one.
            ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Code of the most recent XID error."),
            # Off in the exporter's default list (etc/default-counters.csv at d5e5f51 has it
            # commented out); the GPUDoubleBitECCError alert needs it. Volatile: since the driver
            # loaded.
            (
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                "counter",
                "Double-bit ECC errors since the driver loaded.",
            ),
            (
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                "counter",
                "PCIe transfers that had to be retried.",
            ),
            (
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                "counter",
                "Memory rows remapped after uncorrectable errors.",
            ),
            (
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                "counter",
                "Memory rows remapped after correctable errors.",
            ),
            (
                "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                "gauge",
                "1 when a memory row could not be remapped.",
            ),
        ),
    ),
    (
        # Off in the exporter's default list (etc/default-counters.csv at d5e5f51 has them
        # commented out, "in ns"); the throttling alerts need them. Nanoseconds the clocks were
        # held down (NVML nvmlViolationTime_t.violationTime is in ns).
        "Throttling",
        (
            (
                "DCGM_FI_DEV_POWER_VIOLATION",
                "counter",
                "Time clocks were held down by the power limit in ns.",
            ),
            (
                "DCGM_FI_DEV_THERMAL_VIOLATION",
                "counter",
                "Time clocks were held down by temperature in ns.",
            ),
        ),
    ),
    (
        "Interconnect",
        (
            (
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
                "counter",
                "NVLink bandwidth counter summed over all links.",
            ),
        ),
    ),
    ("Virtual GPUs", (("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "Licence state of a vGPU."),)),
    (
        "Attached as a label to every sample",
        (("DCGM_FI_DRIVER_VERSION", "label", "NVIDIA driver version."),),
    ),
    (
        "Profiling (Volta and newer datacenter GPUs; needs SYS_ADMIN)",
        (
            (
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                "gauge",
                "Fraction of time the graphics engine worked.",
            ),
            (
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                "gauge",
                "Fraction of cycles the tensor core pipe was busy.",
            ),
            (
                "DCGM_FI_PROF_DRAM_ACTIVE",
                "gauge",
                "Fraction of cycles the memory interface was sending or receiving.",
            ),
            ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe bytes sent per second with headers."),
            ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe bytes received per second with headers."),
        ),
    ),
)

# NVIDIA/gpu-operator assets/state-node-status-exporter/0700_daemonset.yaml (v26.7.0): its name.
NODE_STATUS_EXPORTER = "nvidia-node-status-exporter"
# Metrics the exporter serves that the alerts read (NVIDIA/gpu-operator cmd/nvidia-validator/metrics.go,
# v26.7.0), 1 or 0 per node.
DRIVER_VALIDATION = "gpu_operator_node_driver_validation"
TOOLKIT_READY = "gpu_operator_node_toolkit_ready"
CUDA_READY = "gpu_operator_node_cuda_ready"
# The node's nvidia.com/gpu and nvidia.com/mig-* capacity; -1 when the node cannot be read.
PLUGIN_DEVICES = "gpu_operator_node_device_plugin_devices_total"


def node_status_exporter_enabled(stack: Stack) -> bool:
    """Rendered where the setting asks for it and the validator writes the ready files it reads
    (the config check refuses `enabled: true` without the validator)."""
    return stack.config.nodeStatusExporter.enabled and stack.validator_enabled
