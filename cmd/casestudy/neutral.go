package main

import (
	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/ansi"
)

// neutralized are the commands whose standard output shows run data (knob
// values, errors, hosts, names, from files anyone could have edited): it goes
// through ansi.Writer, so an escape sequence planted in a run cannot retitle
// or recolour the terminal (audit N18). run and worker are left alone: run's
// live progress draws with escape sequences of its own.
var neutralized = map[string]bool{"timeline": true, "compare": true, "history": true, "export": true,
	"status": true, "check": true, "baseline": true, "report": true, "plan": true, "validate": true}

func neutralizeOutput(cmd *cobra.Command) {
	if neutralized[cmd.Name()] {
		cmd.SetOut(ansi.NewWriter(cmd.OutOrStdout()))
	}
}
