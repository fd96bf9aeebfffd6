package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/checklist"
)

func init() { register(newChecklistCommand) }

func newChecklistCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checklist",
		Short: "List the best-practice rules with their severity, course chapter and thresholds",
		Long: "checklist lists every rule `casestudy check` applies: its ID (as a study's checklist: section " +
			"names it), severity, course chapter, title and thresholds with their defaults. docs/checklist.md " +
			"describes each rule in full.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChecklist(cmd.OutOrStdout(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rules as JSON")
	return cmd
}

func runChecklist(w io.Writer, asJSON bool) error {
	if !asJSON {
		return checklist.WriteRules(w)
	}
	return writeJSON(w, checklist.Rules())
}
