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
	T            *Trial
	VsText       string // "1.24× [1.13, 1.38]", "baseline", "" for unmeasured trials
	VsKey        string // sort key: the ratio
	VsTip        string
	Verdict      string // the statistics' words: "faster by more than 5%", "within ±5%", ...
	VerdictClass string // better | worse | same | undecided
	MFUTip       string
}

// tableRows are the trials table's rows, whether the vs-baseline columns are
// shown (the baseline finished) and what they hold.
func tableRows(s *Summary) (rows []tableRow, versusShown bool, versusTip string) {
	versusShown = baselineTrial(s) != nil
	versusTip = fmt.Sprintf("the trial's value over the baseline's (> 1 is better) with its %s interval; "+
		"the verdict is against δ = %s (hover for the p-value)", PercentConf(s.Confidence), PercentConf(s.Threshold()))
	for i := range s.Trials {
		t := &s.Trials[i]
		r := tableRow{T: t}
		if c := t.VsBaseline; c != nil && c.Ratio > 0 {
			vs := versusBaseline(t)
			r.VsText, r.VsKey = c.RatioText(), strconv.FormatFloat(c.Ratio, 'g', 6, 64)
			r.VsTip = fmt.Sprintf("%s, %s", c.PText(), vsLaunches(c.NTrial, c.NBase))
			r.Verdict, r.VerdictClass = vs.Text, vs.Verdict
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
	b.WriteString("## Trials\n\n")
	cols := []string{"configuration", "trial", s.Metric.Unit, PercentConf(s.Confidence) + " interval", "launches",
		"vs baseline", "verdict", "p", "step ms p50 (p10–p90)", "CV"}
	if s.MFUPeak != nil {
		cols = append(cols, "MFU", "MFU own precision")
	} else {
		cols = append(cols, "MFU")
	}
	cols = append(cols, "TFLOP/s", "memory held")
	mdRow(b, cols)
	mdRow(b, slices.Repeat([]string{"---"}, len(cols)))
	for _, t := range ok {
		label := labelOf(t)
		if t.Best {
			label += " (best)"
		}
		cv := "—" // one launch: no launch-to-launch spread
		if t.CV != nil {
			cv = Percent(*t.CV)
		}
		if t.Noisy {
			cv += " ⚠ noisy"
		}
		vs, verdict, p := vsCells(t)
		row := []string{label, t.ID, Num(t.Value.Center), Interval(t.Value), launchesText(t), vs, verdict, p,
			fmt.Sprintf("%s (%s–%s)", Num(t.StepMS.Median), Num(t.StepMS.P10), Num(t.StepMS.P90)), cv}
		if s.MFUPeak != nil {
			row = append(row, mfuText(t.MFUBF16), mfuText(t.MFU))
		} else {
			row = append(row, mfuText(t.MFU))
		}
		row = append(row, Num(t.TFLOPS), memHeldText(t))
		mdRow(b, row)
	}
	fmt.Fprintf(b, "\nEach trial is named by the knobs it changes from the baseline. %s %s", MethodText(s), memoryNote)
	if p := s.MFUPeak; p != nil {
		fmt.Fprintf(b, " MFU: against one peak for every trial, the %s's %s (%s TFLOP/s per GPU); "+
			"MFU own precision: against the peak at the trial's precision (the engine's).", p.Device, p.Basis, Num(p.TFLOPS))
	}
	if pw := PowerText(s); pw != "" {
		b.WriteString(" " + pw)
	}
	b.WriteString("\n\n")
}
