"""gpustack: the NVIDIA GPU stack for Kubernetes as plain, validated, diffable manifests."""

__version__ = "0.1.0"
