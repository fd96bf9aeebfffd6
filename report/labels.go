package report

import (
	"slices"
	"strings"
)

// BaselineLabel is the label of the trial that changes nothing.
const BaselineLabel = "baseline"

// setLabels names every trial by the knobs it changes from the baseline, in
// the sweep's order ("precision=bf16, micro_batch=64"); the baseline is
// "baseline". Charts, tables, compare and history show these labels, with the
// trial ID beside them where an ID is needed to re-run a trial.
func setLabels(s *Summary) {
	for i := range s.Trials {
		t := &s.Trials[i]
		t.Label = configLabel(t.Knobs, t.Changed, s.SweptKnobs)
	}
}

// configLabel is "k=v, k2=v2" for the changed knobs, swept ones in order
// first, or BaselineLabel.
func configLabel(knobs map[string]string, changed, order []string) string {
	if len(changed) == 0 {
		return BaselineLabel
	}
	names := slices.Clone(changed)
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + knobs[k]
	}
	return strings.Join(parts, ", ")
}

// labelOf is a trial's label, or its ID when the summary predates labels (a
// baseline file written by an older casestudy).
func labelOf(t *Trial) string {
	if t.Label != "" {
		return t.Label
	}
	return t.ID
}
