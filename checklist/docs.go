package checklist

//go:generate go test -run TestDocsUpToDate -update .

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/internal/course"
)

// Markdown is docs/checklist.md: every rule with its rationale, the metrics it
// needs, its severity, chapter and thresholds. TestDocsUpToDate fails when the
// committed file differs; `go test ./checklist -update` (or go generate)
// rewrites it.
func Markdown() []byte {
	var b strings.Builder
	b.WriteString("<!-- Generated from the rule registry (checklist/); do not edit.\n" +
		"     Regenerate: go test ./checklist -run TestDocsUpToDate -update -->\n\n")
	b.WriteString("# The best-practice checklist\n\n")
	b.WriteString("`casestudy check RUN_DIR` applies these rules to a run's results and environment; " +
		"`casestudy checklist` lists them. Each rule gives **pass**, **finding** (with the numbers, the trials " +
		"they come from and a recommendation) or **not applicable** (with why: the run did not measure what " +
		"the rule needs). Comparisons use clean pairs: trials that differ in exactly one knob, each trial of a group " +
		"(trials equal in every other knob) against the group's references (the trials holding the knob's baseline value, " +
		"`false` or `auto`; the group's first trial when none does). A sweep of n values thus gives n−1 pairs, not " +
		"n(n−1)/2, and `check` stays linear in the trials (20,000 trials: docs/perf.md). " +
		"`--fail-on warning|error` makes `check` exit 1 when a finding of that severity or above exists.\n\n")
	b.WriteString("Severities: **error** means the study's numbers cannot be trusted or are incomplete (launches " +
		"that failed or were tainted, ...), so `casestudy check RUN_DIR --fail-on error` is the nightly gate; " +
		"**warning** is a configuration or measurement worth changing; **info** is worth knowing.\n\n")
	b.WriteString("A study overrides thresholds and disables rules in its `checklist:` section:\n\n" +
		"```yaml\nchecklist:\n  disable: [mps]\n  thresholds:\n    precision: {min_speedup: 1.2}\n" +
		"    measurement-hygiene: {min_steps: 5, min_repeats: 1}\n```\n\n")
	b.WriteString("Noise: two trials differ measurably when their speed differs by more than twice the larger " +
		"run-to-run noise (coefficient of variation of throughput over repeats; with one repeat, the step-time " +
		"CV over √steps), and at least the rule's `noise_floor`.\n\n")
	b.WriteString("Each rule cites the chapter of [the course](course.md) casestudy follows that explains it.\n\n")
	b.WriteString("| Rule | Severity | Course chapter | Title |\n|---|---|---|---|\n")
	for _, r := range registry {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %d, %s | %s |\n", r.ID, r.ID, r.Severity, r.Chapter, course.Topic(r.Chapter), r.Title)
	}
	for _, r := range registry {
		fmt.Fprintf(&b, "\n## %s\n\n**%s** · severity %s · course %s\n\n%s\n\n", r.ID, r.Title, r.Severity, course.Cite(r.Chapter), r.Rationale)
		fmt.Fprintf(&b, "Needs: %s.\n", strings.Join(r.Needs, "; "))
		if len(r.Thresholds) > 0 {
			b.WriteString("\n| Threshold | Default | Unit | Meaning |\n|---|---|---|---|\n")
			for _, t := range r.Thresholds {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", t.Name, num(t.Default), t.Unit, t.Doc)
			}
		}
	}
	return []byte(b.String())
}
