package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/provenance/nvmlgpu"
)

func init() { register(newNodeInfoCommand) }

// newNodeInfoCommand is the hidden `casestudy node-info`: this node's
// provenance (host, GPUs, driver, topology, the engine's torch/CUDA/NCCL) as
// one JSON line. `casestudy run` starts it on every node of a Slurm
// allocation and records the answers in the manifest (host.nodes).
func newNodeInfoCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "node-info",
		Short:  "Print this node's provenance as JSON (started by casestudy run on every node)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gpus := nvmlgpu.Open()
			defer gpus.Close()
			h := provenance.ReadHost(gpus)
			if _, bi, err := binding.Probe(engineLibFlag(cmd)); err == nil {
				h.Engine = &bi
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(h)
		},
	}
}
