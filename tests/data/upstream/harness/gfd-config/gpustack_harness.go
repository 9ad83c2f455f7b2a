// gpustack's test harness, added to NVIDIA's gpu-feature-discovery (cmd/gpu-feature-discovery,
// package main) at build time, with the app's action pointed at gpustackPrintConfig: GFD's own
// flags, environment variables and loadConfig (which validates them) read the config as GFD does
// at start, and the harness prints it as JSON instead of labelling a node.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func gpustackPrintConfig(c *cli.Context, cfg *Config) error {
	config, err := cfg.loadConfig(c)
	if err != nil {
		return fmt.Errorf("unable to load config: %v", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"config":          config,
		"sharingStrategy": config.Sharing.SharingStrategy(),
	})
}
