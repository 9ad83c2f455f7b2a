// gpustack's stand-in for the kubelet's side of the device-plugin API (v1beta1), built inside
// NVIDIA's k8s-device-plugin module so that it uses the API's own vendored gRPC definitions
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1). It serves the Registration service on
// kubelet.sock in -dir, as the kubelet does; for each plugin that registers it dials the plugin's
// endpoint, reads its options and its first ListAndWatch answer and, with -allocate, asks it to
// allocate one device, as the kubelet does when a pod requests the resource. After -expect
// registrations (or -timeout) it prints what it saw as one JSON document and exits: 0 when it saw
// -expect plugins, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type device struct {
	ID     string  `json:"id"`
	Health string  `json:"health"`
	NUMA   []int64 `json:"numa,omitempty"`
}

type allocation struct {
	Envs        map[string]string `json:"envs,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	CDIDevices  []string          `json:"cdiDevices,omitempty"`
	DeviceNodes []string          `json:"deviceNodes,omitempty"`
	Mounts      []string          `json:"mounts,omitempty"`
	Error       string            `json:"error,omitempty"`
}

type registration struct {
	Resource   string      `json:"resource"`
	Version    string      `json:"version"`
	Endpoint   string      `json:"endpoint"`
	PreStart   bool        `json:"preStartRequired"`
	Preferred  bool        `json:"getPreferredAllocationAvailable"`
	Devices    []device    `json:"devices"`
	Allocation *allocation `json:"allocation,omitempty"`
	Error      string      `json:"error,omitempty"`
}

type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir      string
	allocate bool
	mu       sync.Mutex
	seen     []registration
	done     chan struct{}
	expect   int
	pending  sync.WaitGroup
}

func (k *kubelet) Register(_ context.Context, request *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r := registration{Resource: request.ResourceName, Version: request.Version, Endpoint: request.Endpoint}
	if request.Options != nil {
		r.PreStart = request.Options.PreStartRequired
		r.Preferred = request.Options.GetPreferredAllocationAvailable
	}
	k.pending.Add(1)
	// The kubelet answers the registration first and then connects to the plugin.
	go func() {
		defer k.pending.Done()
		k.inspect(&r)
		k.mu.Lock()
		k.seen = append(k.seen, r)
		if len(k.seen) == k.expect {
			close(k.done)
		}
		k.mu.Unlock()
	}()
	return &pluginapi.Empty{}, nil
}

func (k *kubelet) inspect(r *registration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, r.Endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.Error = fmt.Sprintf("dial: %v", err)
		return
	}
	defer conn.Close()
	client := pluginapi.NewDevicePluginClient(conn)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		r.Error = fmt.Sprintf("ListAndWatch: %v", err)
		return
	}
	answer, err := stream.Recv()
	if err != nil {
		r.Error = fmt.Sprintf("ListAndWatch: %v", err)
		return
	}
	for _, d := range answer.Devices {
		entry := device{ID: d.ID, Health: d.Health}
		if d.Topology != nil {
			for _, node := range d.Topology.Nodes {
				entry.NUMA = append(entry.NUMA, node.ID)
			}
		}
		r.Devices = append(r.Devices, entry)
	}
	sort.Slice(r.Devices, func(i, j int) bool { return r.Devices[i].ID < r.Devices[j].ID })
	if !k.allocate || len(r.Devices) == 0 {
		return
	}
	request := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{r.Devices[0].ID}},
	}}
	response, err := client.Allocate(ctx, request)
	if err != nil {
		r.Allocation = &allocation{Error: err.Error()}
		return
	}
	a := &allocation{}
	for _, container := range response.ContainerResponses {
		a.Envs = container.Envs
		a.Annotations = container.Annotations
		for _, d := range container.CdiDevices {
			a.CDIDevices = append(a.CDIDevices, d.Name)
		}
		for _, d := range container.Devices {
			a.DeviceNodes = append(a.DeviceNodes, d.ContainerPath)
		}
		for _, m := range container.Mounts {
			a.Mounts = append(a.Mounts, m.ContainerPath)
		}
	}
	r.Allocation = a
}

func main() {
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin folder")
	expect := flag.Int("expect", 1, "how many plugins to wait for")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for them")
	allocate := flag.Bool("allocate", true, "allocate one device of each resource")
	flag.Parse()

	socket := filepath.Join(*dir, "kubelet.sock")
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	k := &kubelet{dir: *dir, allocate: *allocate, done: make(chan struct{}), expect: *expect}
	server := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(server, k)
	go func() { _ = server.Serve(listener) }()

	select {
	case <-k.done:
	case <-time.After(*timeout):
	}
	server.Stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	sort.Slice(k.seen, func(i, j int) bool { return k.seen[i].Resource < k.seen[j].Resource })
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	_ = encoder.Encode(map[string]any{"registrations": k.seen})
	if len(k.seen) < *expect {
		os.Exit(1)
	}
}
