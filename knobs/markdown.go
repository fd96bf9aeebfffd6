package knobs

import (
	"fmt"
	"io"
	"strings"

	"github.com/casestudy/casestudy/internal/course"
)

// WriteMarkdown writes docs/knobs.md: a table of every visible knob, then one
// section per knob. The file is generated; knobs_test.go fails when it is stale
// (regenerate with `go test ./knobs -run TestKnobsDoc -update`).
func WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Knobs\n\n")
	b.WriteString("<!-- Generated from knobs/registry.go by `go test ./knobs -run TestKnobsDoc -update`; do not edit. -->\n\n")
	b.WriteString("Every setting a study can put in `baseline` or sweep. `auto` leaves a setting to what the trial finds: " +
		"an env knob's variable is inherited from the environment casestudy runs in (a cluster's exported `NCCL_IB_HCA` or " +
		"`NCCL_SOCKET_IFNAME` stands; the run warns about each one it inherits and the manifest records them under `inherited_env`), " +
		"and the library chooses when the environment has none. `default` (env knobs only) unsets the variable for the trial, " +
		"even if the parent shell set it: the library's own default. " +
		"Env knobs become environment variables of every rank, engine knobs fields of the engine config, " +
		"launcher knobs settings of the runner. `casestudy knobs NAME` prints one entry. " +
		"NCCL_NVLS_ENABLE is 0 in every trial (NVLink multicast stays off) unless a study sets `sweep.allow_nvls: true`; " +
		"casestudy never sets it to 1.\n\n")
	b.WriteString("Each knob cites the chapter of the course casestudy follows that explains it " +
		"([the course](course.md): 30 chapters on multi-GPU CUDA programming).\n\n")
	b.WriteString("| knob | type | domain | default | applied as | course chapter |\n|---|---|---|---|---|---|\n")
	for _, k := range Visible() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | `%s` | %s | %d, %s |\n", k.Name, anchor(k.Name), k.Type,
			escape(k.Domain()), k.Default, k.AppliedAs(), k.Chapter, course.Topic(k.Chapter))
	}
	for _, k := range Visible() {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", k.Name, k.Doc)
		fmt.Fprintf(&b, "- type: %s; domain: %s; default: `%s`\n", k.Type, escape(k.Domain()), k.Default)
		fmt.Fprintf(&b, "- applied as: %s\n", k.AppliedAs())
		if len(k.Families) > 0 {
			fmt.Fprintf(&b, "- model families: %s\n", strings.Join(k.Families, ", "))
		}
		if k.Constraint != "" {
			fmt.Fprintf(&b, "- planner: %s\n", k.Constraint)
		}
		fmt.Fprintf(&b, "- explained in: [course](course.md) %s\n", course.Cite(k.Chapter))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// AppliedAs says in words how the knob reaches a trial.
func (k *Knob) AppliedAs() string {
	switch k.Apply {
	case Env:
		return "env `" + k.EnvVar + "`"
	case Engine:
		return "engine config"
	case Launcher:
		if k.EnvVar != "" {
			return "launcher (`" + k.EnvVar + "`)"
		}
		return "launcher"
	}
	return string(k.Apply)
}

func anchor(name string) string { return strings.ReplaceAll(name, ".", "") }

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
