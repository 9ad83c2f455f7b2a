// gpustack's stand-in for a host tool (nvidia-smi, modprobe) in a fake host root: a static
// binary that succeeds, so that a component which runs the tool through `chroot` finds it
// there without a driver or a GPU.
package main

func main() {}
