package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/course"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/knobs"
)

func init() { register(newKnobsCommand) }

type knobsOptions struct {
	json bool
	all  bool
}

func newKnobsCommand() *cobra.Command {
	var opts knobsOptions
	cmd := &cobra.Command{
		Use:   "knobs [NAME]",
		Short: "List the knobs a study can set or sweep, or explain one",
		Long: "knobs lists the registry: every knob's type, default, how it is applied (environment variable, " +
			"engine config, launcher) and the course chapter that explains it. With NAME it explains one knob: domain, doc and " +
			"what the planner checks. docs/knobs.md holds the same text.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runKnobs(cmd.OutOrStdout(), name, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON instead of text")
	cmd.Flags().BoolVar(&opts.all, "all", false, "include test-only knobs (fault injection)")
	return cmd
}

// knobJSON is one knob in `casestudy knobs --json`.
type knobJSON struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Values     []string `json:"values,omitempty"`
	Min        string   `json:"min,omitempty"`
	Max        string   `json:"max,omitempty"`
	Domain     string   `json:"domain"`
	Default    string   `json:"default"`
	Apply      string   `json:"apply"`
	EnvVar     string   `json:"env_var,omitempty"`
	Families   []string `json:"families,omitempty"`
	Constraint string   `json:"constraint,omitempty"`
	Doc        string   `json:"doc"`
	Chapter    int      `json:"chapter"`
	Hidden     bool     `json:"hidden,omitempty"`
}

func toKnobJSON(k *knobs.Knob) knobJSON {
	return knobJSON{Name: k.Name, Type: string(k.Type), Values: k.Values, Min: k.Min, Max: k.Max, Domain: k.Domain(),
		Default: k.Default, Apply: string(k.Apply), EnvVar: k.EnvVar, Families: k.Families, Constraint: k.Constraint,
		Doc: k.Doc, Chapter: k.Chapter, Hidden: k.Hidden}
}

func runKnobs(w io.Writer, name string, opts knobsOptions) error {
	if name != "" {
		k, ok := knobs.Lookup(name)
		if !ok {
			hint := "see 'casestudy knobs' for the list"
			if s := knobs.Suggest(name); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			return exitcode.Usage(fmt.Errorf("no knob %q (%s)", name, hint))
		}
		if opts.json {
			return writeJSON(w, toKnobJSON(k))
		}
		return writeKnob(w, k)
	}
	list := knobs.Visible()
	if opts.all {
		list = knobs.All()
	}
	if opts.json {
		out := make([]knobJSON, len(list))
		for i, k := range list {
			out[i] = toKnobJSON(k)
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tTYPE\tDEFAULT\tAPPLIED AS\tCHAPTER")
	for _, k := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", k.Name, k.Type, k.Default, strings.ReplaceAll(k.AppliedAs(), "`", ""), k.Chapter)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d knobs; 'casestudy knobs NAME' explains one.\n", len(list))
	return nil
}

func writeKnob(w io.Writer, k *knobs.Knob) error {
	fmt.Fprintf(w, "%s (%s)\n\n", k.Name, k.Type)
	fmt.Fprintf(w, "%s\n\n", wrap(k.Doc, 78))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "domain:\t%s\n", k.Domain())
	fmt.Fprintf(tw, "default:\t%s\n", k.Default)
	fmt.Fprintf(tw, "applied as:\t%s\n", strings.ReplaceAll(k.AppliedAs(), "`", ""))
	if len(k.Families) > 0 {
		fmt.Fprintf(tw, "families:\t%s\n", strings.Join(k.Families, ", "))
	}
	if k.Constraint != "" {
		fmt.Fprintf(tw, "planner:\t%s\n", k.Constraint)
	}
	fmt.Fprintf(tw, "course:\t%s (docs/course.md)\n", course.Cite(k.Chapter))
	if k.Hidden {
		fmt.Fprintf(tw, "note:\ttest-only (fault injection)\n")
	}
	return tw.Flush()
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && line+1+len(word) > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
