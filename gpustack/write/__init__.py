"""Writing rendered folders to disk, whole and only gpustack's files, and the output folder's
shape as Argo CD and Flux read it."""
