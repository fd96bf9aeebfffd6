package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/study"
)

// run --rehearse (workload.rehearse: true): every trial with its real ranks
// and layout as processes sharing the GPUs present, host-staged; nothing
// measured (docs/rehearsal.md, runner/rehearse.go).

// rehearsalSetup checks the flags a rehearsal cannot take and caps its steps.
func rehearsalSetup(cmd *cobra.Command, o *runOptions, s *study.Study) error {
	switch {
	case o.rehearseDistinct && !s.Workload.Rehearse:
		return exitcode.Usage(errors.New("--rehearse-distinct goes with --rehearse (or workload.rehearse: true)"))
	case cmd.Flags().Changed("rehearse-faults") && !s.Workload.Rehearse:
		return exitcode.Usage(errors.New("--rehearse-faults goes with --rehearse (or workload.rehearse: true)"))
	case o.resume != "":
		return exitcode.Usage(errors.New("--resume with a rehearsal: a rehearsal is quick; run it again instead"))
	case o.launcher.submit:
		return exitcode.Usage(errors.New("--submit with a rehearsal: a rehearsal runs every rank on this machine; drop --rehearse to submit the study"))
	case o.launcher.kind != "" && o.launcher.kind != "local":
		return exitcode.Usage(fmt.Errorf("--launcher %s with a rehearsal: a rehearsal runs every rank on this machine (local)", o.launcher.kind))
	}
	runner.RehearsalSteps(&s.Workload, cmd.Flags().Changed("warmup"), cmd.Flags().Changed("steps"))
	return nil
}

// rehearsalFit is the plan-time memory check (runner.CheckRehearsalFit) with
// the machine's engine library describing the models.
func rehearsalFit(s *study.Study, plan *study.Plan, m *runner.Machine, gpus provenance.GPUs, distinct bool) (*runner.RehearsalFit, error) {
	lib, err := binding.Load(m.EngineLib)
	if err != nil {
		return nil, exitcode.With(exitcode.Environment, err)
	}
	defer lib.Close()
	return runner.CheckRehearsalFit(s, plan, m, lib.Describe, m.RehearsalTarget(provenance.ReadHost(gpus)), distinct)
}
