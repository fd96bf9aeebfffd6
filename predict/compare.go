package predict

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Check is one predicted trial against its measurement on the target.
type Check struct {
	ID        string  `json:"id"`
	Changed   string  `json:"changed"`
	Predicted float64 `json:"predicted_step_ms"`
	Measured  float64 `json:"measured_step_ms"`
	Error     float64 `json:"error"` // (predicted - measured) / measured
	InBand    bool    `json:"in_band"`
}

// Validation is a set of predictions against measurements.
type Validation struct {
	Checks         []Check  `json:"checks"`
	MedianAbsError float64  `json:"median_abs_error"`
	PredictedBest  string   `json:"predicted_best"`
	MeasuredBest   string   `json:"measured_best"`
	SameBest       bool     `json:"same_best"`
	Unmatched      []string `json:"unmatched,omitempty"`     // predictions with no measurement
	MeasuredOnly   []string `json:"measured_only,omitempty"` // measured trials (their keys) with no prediction
	// WinnerDecidable: the measurement separates its best trial from every
	// other (runs.DecideWinner); when false SameBest tests nothing and no
	// verdict rests on it. Separations: the evidence, one line per trial.
	WinnerDecidable bool     `json:"winner_decidable"`
	Separations     []string `json:"separations,omitempty"`
}

// Validate compares predictions with measured step times (ms) by trial
// key; key names a prediction the way the measured map does (knob values).
// A prediction without a measurement goes to Unmatched, a measured trial
// without a prediction to MeasuredOnly: either leaves the validation
// incomplete (Incomplete), and no verdict rests on it.
func Validate(preds []Prediction, measured map[string]float64, key func(Prediction) string, changed func(Prediction) string) Validation {
	var v Validation
	var abs []float64
	bestP, bestM := math.Inf(1), math.Inf(1)
	predicted := map[string]bool{}
	for _, p := range preds {
		predicted[key(p)] = true
		m, ok := measured[key(p)]
		if !ok || m <= 0 {
			v.Unmatched = append(v.Unmatched, p.ID)
			continue
		}
		c := Check{ID: p.ID, Changed: changed(p), Predicted: p.StepMS, Measured: m, Error: (p.StepMS - m) / m,
			InBand: m >= p.LowMS && m <= p.HighMS}
		v.Checks = append(v.Checks, c)
		abs = append(abs, math.Abs(c.Error))
		if p.StepMS < bestP {
			bestP, v.PredictedBest = p.StepMS, p.ID
		}
		if m < bestM {
			bestM, v.MeasuredBest = m, p.ID
		}
	}
	for k, m := range measured {
		if m > 0 && !predicted[k] {
			v.MeasuredOnly = append(v.MeasuredOnly, k)
		}
	}
	sort.Strings(v.MeasuredOnly)
	v.MedianAbsError = Median(abs)
	v.SameBest = v.PredictedBest != "" && v.PredictedBest == v.MeasuredBest
	return v
}

// Incomplete says why no verdict can rest on v ("" when one can): no trial
// both predicted and measured, a prediction without its measurement (the
// error and the winner judged on the rest), or a measured trial without its
// prediction (it could be the measured winner, which the model then never
// named). The gate fails closed on it.
func (v Validation) Incomplete() string {
	var why []string
	if len(v.Checks) == 0 {
		why = append(why, "no trial both predicted and measured")
	}
	if len(v.Unmatched) > 0 {
		why = append(why, "no measurement for "+strings.Join(v.Unmatched, ", "))
	}
	if len(v.MeasuredOnly) > 0 {
		why = append(why, "no prediction for the measured "+strings.Join(v.MeasuredOnly, "; "))
	}
	return strings.Join(why, "; ")
}

// WinnerLine says whether the measurement separates its best trial from
// every other (runs.DecideWinner), with the evidence: without it the same
// or a different winner tests nothing.
func (v Validation) WinnerLine() string {
	if why := v.Incomplete(); why != "" {
		return "Not judged: " + why + "."
	}
	s := "The measured winner is separated from every other trial ("
	if !v.WinnerDecidable {
		s = "The winner is not decidable by the measurement: its best trial is not separated from every other ("
	}
	if len(v.Separations) == 0 {
		s += "no launches to compare"
	}
	return s + strings.Join(v.Separations, "; ") + ")."
}

// Markdown renders predictions as their own report section: predicted
// values with their bands and inputs, apart from every measurement.
func Markdown(preds []Prediction, changed func(Prediction) string, v *Validation) string {
	var b strings.Builder
	if len(preds) == 0 {
		return "## Predicted trials (not measured)\n\nNone.\n"
	}
	p0 := preds[0]
	fmt.Fprintf(&b, "## Predicted trials (not measured)\n\n")
	kappa := fmt.Sprintf("κ = %.3g (the backward's pace is 1/κ while a collective runs)", p0.Kappa)
	if c := p0.Calibration; c != nil && c.ShadowRanks > 0 {
		kappa = "κ and the collectives' times per trial from its stretch calibration (below)"
	}
	fmt.Fprintf(&b, "Predicted for **%d ranks** from this run's one-rank measurements by the reducer-schedule simulator "+
		"(docs/predict.md). Cost model: %s. %s, compute scale = %.3g. These are predictions: they are in no verdict, "+
		"baseline, compare or history. The band spans the launches' spread and the cost model's error (±%.1f%%).\n\n",
		p0.Ranks, p0.Model, kappa, p0.ComputeScale, 100*p0.CostError)
	b.WriteString("| trial | changed | overlap | predicted step | band | exposed comm | comm | samples/s (all ranks) | buckets |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	sorted := append([]Prediction(nil), preds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].StepMS < sorted[j].StepMS })
	for _, p := range sorted {
		fmt.Fprintf(&b, "| %s | %s | %t | %.2f ms | %.2f–%.2f ms | %.2f ms | %.2f ms | %.1f | %d |\n",
			p.ID, changed(p), p.Overlap, p.StepMS, p.LowMS, p.HighMS, p.ExposedCommMS, p.CommMS, p.SamplesPerS, len(p.Buckets))
	}
	b.WriteString("\nInputs (one rank, medians over the measured steps): ")
	for i, p := range sorted {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: forward %.2f, backward %.2f, tail %.2f, optimizer %.2f ms, %d buckets", p.ID,
			p.Inputs.ForwardMS, p.Inputs.BackwardMS, p.Inputs.TailMS, p.Inputs.OptimizerMS, len(p.Inputs.Buckets))
		if p.Overlap && (p.Stretch != nil || p.StretchMS > 0) {
			fmt.Fprintf(&b, " (backward +%.2f ms beside the collectives)", p.StretchMS)
		}
		if c := p.Calibration; c != nil && c.ShadowRanks > 0 {
			fmt.Fprintf(&b, ", κ %.3g from its stretch calibration (ratio %.3f over %d steps)", p.Kappa, c.Ratio, c.Steps)
		}
		if p.CollectiveDraws {
			b.WriteString(", each collective's time drawn from the calibration's times of its size")
		}
	}
	b.WriteString(".\n")
	if p0.Stretch != nil {
		fmt.Fprintf(&b, "Backward stretched by the collectives it overlaps: %s.\n", p0.Stretch.Name())
	}
	if v != nil {
		fmt.Fprintf(&b, "\n### Predicted against measured\n\n| trial | changed | predicted | measured | error | in band |\n|---|---|---|---|---|---|\n")
		for _, c := range v.Checks {
			fmt.Fprintf(&b, "| %s | %s | %.2f ms | %.2f ms | %+.1f%% | %t |\n", c.ID, c.Changed, c.Predicted, c.Measured, 100*c.Error, c.InBand)
		}
		if v.Incomplete() == "" { // an incomplete check states no error and no winner: only why
			fmt.Fprintf(&b, "\nMedian absolute error %.1f%%; best trial predicted %s, measured %s (%s).\n",
				100*v.MedianAbsError, v.PredictedBest, v.MeasuredBest, map[bool]string{true: "same", false: "different"}[v.SameBest])
		} else {
			b.WriteString("\n")
		}
		b.WriteString(v.WinnerLine() + "\n")
	}
	return b.String()
}
