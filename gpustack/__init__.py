"""gpustack: the NVIDIA GPU stack for Kubernetes as plain, validated, diffable manifests."""

import gc

__version__ = "0.1.0"


def tune_gc() -> None:
    """Make the cyclic garbage collector rare: rendering builds many small acyclic trees of dicts
    and lists, which reference counting frees, and with the default thresholds Python rescans
    them thousands of times per fleet (half of the time of a 1,000-cluster render)."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
