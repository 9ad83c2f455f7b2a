"""`gpustack import`: what a cluster already runs (a ClusterPolicy, chart values) as a config."""
