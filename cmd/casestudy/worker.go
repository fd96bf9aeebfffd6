package main

import (
	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/runner"
)

func init() { register(newWorkerCommand) }

// newWorkerCommand is the hidden `casestudy worker`: one rank of a trial,
// started by `casestudy run` with the rendezvous address, token and rank in
// its environment (docs/architecture.md, "Worker protocol").
func newWorkerCommand() *cobra.Command {
	return graceful(&cobra.Command{
		Use:    "worker",
		Short:  "Run one rank of a trial (started by casestudy run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runner.RunWorker(cmd.Context(), runner.WorkerOptions{
				Log:  cmd.ErrOrStderr(),
				Open: openEngine,
			})
		},
	})
}

// libraryBackend adapts the loaded engine library to runner.Backend.
type libraryBackend struct{ lib *binding.Library }

func openEngine(path string) (runner.Backend, error) {
	lib, err := binding.Load(path)
	if err != nil {
		return nil, err
	}
	return libraryBackend{lib}, nil
}

func (b libraryBackend) NCCLUniqueID() (string, error) { return b.lib.NCCLUniqueID() }

func (b libraryBackend) CommProgress() (engine.CommProgress, error) { return b.lib.CommProgress() }

func (b libraryBackend) SetCommTimeout(ms int) (int, error) { return b.lib.SetCommTimeout(ms) }

func (b libraryBackend) Create(cfg engine.Config) (runner.Engine, error) {
	e, err := b.lib.Create(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}
