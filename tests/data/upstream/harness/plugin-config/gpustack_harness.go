// gpustack's test harness, added to NVIDIA's device plugin (cmd/nvidia-device-plugin, package
// main) at build time, with the app's action pointed at gpustackPrintConfig. The plugin's own
// flags, environment variables, loadConfig and validateFlags read the config as the plugin does
// at start; instead of starting the plugins, the harness prints the config as JSON. The one
// thing it stands in for is NVML, which a machine without a GPU lacks: validateFlags refuses CDI
// strategies where NVML is missing, which on a GPU node it never is.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	nvinfo "github.com/NVIDIA/go-nvlib/pkg/nvlib/info"
	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"github.com/urfave/cli/v2"
)

type gpustackNodeWithNvml struct{ nvinfo.Interface }

func (gpustackNodeWithNvml) HasNvml() (bool, string) { return true, "a GPU node" }

func gpustackPrintConfig(c *cli.Context, o *options) error {
	config, err := loadConfig(c, o.flags)
	if err != nil {
		return fmt.Errorf("unable to load config: %v", err)
	}
	spec.DisableResourceNamingInConfig(config)
	if err := validateFlags(gpustackNodeWithNvml{}, config); err != nil {
		return fmt.Errorf("unable to validate flags: %v", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"config":          config,
		"sharingStrategy": config.Sharing.SharingStrategy(),
		"cdiFeatureFlags": o.cdiFeatureFlags.Value(),
		"kubeletSocket":   o.kubeletSocket,
	})
}
