from gpustack.cli import main

main()
