package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// tableRow is one row of the HTML trials table: the trial and what the
// table shows beside its own fields.
type tableRow struct {
	T      *Trial
	VsText string // "1.24×", "" for the baseline and unmeasured trials
	VsKey  string // sort key
	VsTip  string
	MFUTip string
}

// tableRows are the trials table's rows, whether the vs-baseline column is
// shown (the baseline finished) and what it holds.
func tableRows(s *Summary) (rows []tableRow, versusShown bool, versusTip string) {
	m := objectiveMeasure(s)
	versusShown = baselineTrial(s) != nil
	versusTip = fmt.Sprintf("the ratio of the medians of %s to the baseline's, > 1 is better", m.unit)
	for i := range s.Trials {
		t := &s.Trials[i]
		r := tableRow{T: t}
		if vs := versusBaseline(s, m, t); vs.Ratio > 0 {
			r.VsText, r.VsKey = Ratio(vs.Ratio), strconv.FormatFloat(vs.Ratio, 'g', 6, 64)
			r.VsTip = fmt.Sprintf("%s of the baseline's %s", Ratio(vs.Ratio), m.name)
			if vs.Lo > 0 && vs.Hi > 0 {
				r.VsTip += fmt.Sprintf(" [%.2f, %.2f]", vs.Lo, vs.Hi)
			}
			if vs.Verdict != "" {
				r.VsText += " " + vs.Verdict
			}
		} else if t.Baseline && t.OK() {
			r.VsText, r.VsKey = "baseline", "1"
		}
		if t.MFUBF16 > 0 && s.MFUPeak != nil {
			r.MFUTip = fmt.Sprintf("%s of the %s (%s TFLOP/s per GPU)", Percent(t.MFUBF16), s.MFUPeak.Basis, Num(s.MFUPeak.TFLOPS))
			if t.MFU > 0 {
				r.MFUTip += fmt.Sprintf("; %s of the peak at its own precision (%s)", Percent(t.MFU), precisionOf(t))
			}
		}
		rows = append(rows, r)
	}
	return rows, versusShown, versusTip
}

// droppedLabel names a dropped combination by its knobs, swept ones in the
// sweep's order.
func droppedLabel(s *Summary, knobs map[string]string) string {
	return configLabel(knobs, slices.Sorted(maps.Keys(knobs)), s.SweptKnobs)
}

// writeTrialsMD writes report.md's trials table: one row per finished trial,
// named by its knob values, with its ID.
func writeTrialsMD(b *strings.Builder, s *Summary, ok []*Trial) {
	rows, versusShown, versusTip := tableRows(s)
	byID := map[string]tableRow{}
	for _, r := range rows {
		byID[r.T.ID] = r
	}
	b.WriteString("## Trials\n\n")
	cols := []string{"configuration", "trial", "samples/s", "95% CI", "n"}
	if versusShown {
		cols = append(cols, "vs baseline")
	}
	cols = append(cols, "step ms p50 (p10–p90)", "CV")
	if s.MFUPeak != nil {
		cols = append(cols, "MFU", "MFU own precision")
	} else {
		cols = append(cols, "MFU")
	}
	cols = append(cols, "TFLOP/s", "peak mem")
	mdRow(b, cols)
	mdRow(b, slices.Repeat([]string{"---"}, len(cols)))
	for _, t := range ok {
		label := labelOf(t)
		if t.Best {
			label += " (best)"
		}
		cv := Percent(t.CV)
		if t.Noisy {
			cv += " ⚠ noisy"
		}
		row := []string{label, t.ID, Num(t.Throughput.Center), Interval(t.Throughput), fmt.Sprintf("%d %s", t.Throughput.N, t.Samples.Source)}
		if versusShown {
			row = append(row, byID[t.ID].VsText)
		}
		row = append(row, fmt.Sprintf("%s (%s–%s)", Num(t.StepMS.Median), Num(t.StepMS.P10), Num(t.StepMS.P90)), cv)
		if s.MFUPeak != nil {
			row = append(row, mfuText(t.MFUBF16), mfuText(t.MFU))
		} else {
			row = append(row, mfuText(t.MFU))
		}
		row = append(row, Num(t.TFLOPS), memText(t.MemPeakBytes))
		mdRow(b, row)
	}
	b.WriteString("\nEach trial is named by the knobs it changes from the baseline. Intervals are distribution-free 95% confidence " +
		"intervals of the median (benchmath); n counts repeats (separate launches) or, for single-repeat trials, measured steps.")
	if versusShown {
		b.WriteString(" vs baseline: " + versusTip + ".")
	}
	if p := s.MFUPeak; p != nil {
		fmt.Fprintf(b, " MFU: against one peak for every trial, the %s's %s (%s TFLOP/s per GPU); "+
			"MFU own precision: against the peak at the trial's precision (the engine's).", p.Device, p.Basis, Num(p.TFLOPS))
	}
	b.WriteString("\n\n")
}
