"""`python -m gpustack`: the command line, as the `gpustack` console script runs it."""

from gpustack.cli import main

main()
