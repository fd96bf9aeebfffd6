package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/perf/benchfmt"

	"github.com/casestudy/casestudy/stats"
)

// Units of the benchfmt export. sec/op is a standard unit; samples/s is a
// custom one declared better=higher so benchstat reads a drop as a slowdown.
const (
	UnitStepTime   = "sec/op"
	UnitThroughput = "samples/s"
)

// benchUnit is the objective's benchfmt unit and the factor from its own
// unit (step time in ms becomes sec/op; memory in bytes B).
func benchUnit(m stats.Metric) (unit string, scale float64) {
	switch m.Name {
	case "step_time":
		return UnitStepTime, 1e-3
	case "memory":
		return "B", 1
	}
	return m.Unit, 1
}

// WriteBenchfmt writes the Go benchmark format, so benchstat and its tooling
// read casestudy results unchanged. Each ok trial gives one result line per
// clean launch (the replicate), named Train/trial=<ID>, with the study's
// objective in its unit and samples/s, and the study and every knob as
// configuration keys (not the run ID: benchstat tables group by the
// configuration, so two runs of a study must share it). Trials that did not
// finish have no lines. It returns the number of trials written.
func WriteBenchfmt(w io.Writer, s *Summary) (int, error) {
	bw := benchfmt.NewWriter(w)
	unit, scale := benchUnit(s.Metric)
	better := "higher"
	if !s.Metric.HigherIsBetter {
		better = "lower"
	}
	meta := []*benchfmt.UnitMetadata{
		{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: UnitThroughput, Key: "better"}, OrigUnit: UnitThroughput, Value: "higher"},
		{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: UnitThroughput, Key: "assume"}, OrigUnit: UnitThroughput, Value: "nothing"},
	}
	if unit != UnitThroughput {
		meta = append(meta,
			&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: unit, Key: "better"}, OrigUnit: unit, Value: better},
			&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: unit, Key: "assume"}, OrigUnit: unit, Value: "nothing"})
	}
	for _, m := range meta {
		if err := bw.Write(m); err != nil {
			return 0, err
		}
	}
	n := 0
	for i := range s.Trials {
		t := &s.Trials[i]
		if !t.OK() {
			continue
		}
		n++
		res := &benchfmt.Result{Name: benchfmt.Name("Train/trial=" + configValue(t.ID)), Iters: 1}
		res.SetConfig("study", configValue(s.Study))
		res.SetConfig("sample", "launch")
		for _, k := range slices.Sorted(maps.Keys(t.Knobs)) {
			res.SetConfig(configKey(k), configValue(t.Knobs[k]))
		}
		for j := range res.Config {
			res.Config[j].File = true
		}
		for j, v := range t.Launches.Values {
			res.Values = append(res.Values[:0], benchfmt.Value{Value: v * scale, Unit: unit})
			if unit != UnitThroughput {
				res.Values = append(res.Values, benchfmt.Value{Value: t.Launches.SamplesPerS[j], Unit: UnitThroughput})
			}
			if err := bw.Write(res); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// configKey makes a knob name a valid benchfmt key: lower case, no spaces.
func configKey(k string) string {
	k = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == ':' {
			return '_'
		}
		return unicode.ToLower(r)
	}, k)
	if k == "" || !unicode.IsLower([]rune(k)[0]) {
		k = "knob_" + k
	}
	return k
}

// configValue keeps a value on one line and a name free of spaces.
func configValue(v string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, v)
}

// WriteCSV writes one row per trial for spreadsheets: label, outcome, every
// knob, the objective's value with its interval and launches, the comparison
// with the baseline (ratio, interval, p, verdict), samples/s and tokens/s by
// the same estimator, step time, CV, MFU (at the trial's precision, and
// against the one bf16 peak), memory, breakdown.
func WriteCSV(w io.Writer, s *Summary) error {
	knobSet := map[string]bool{}
	for _, t := range s.Trials {
		for k := range t.Knobs {
			knobSet[k] = true
		}
	}
	knobNames := slices.Sorted(maps.Keys(knobSet))
	head := []string{"trial", "label", "outcome"}
	head = append(head, knobNames...)
	head = append(head, "objective", "unit", "value", "value_lo", "value_hi", "confidence", "launches",
		"vs_baseline", "vs_baseline_lo", "vs_baseline_hi", "p", "verdict", "samples_per_s", "tokens_per_s",
		"step_ms_median", "step_ms_p10", "step_ms_p90", "cv", "noisy", "mfu", "mfu_bf16", "tflops", "mem_peak_bytes", "mem_held_bytes", "final_loss",
		"forward_ms", "backward_ms", "optimizer_ms", "exposed_comm_ms", "bubble_ms", "other_ms", "tp_comm_ms", "error", "command")
	cw := csv.NewWriter(w)
	if err := cw.Write(csvSafe(head)); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, t := range s.Trials {
		row := []string{t.ID, t.Label, string(t.Outcome)}
		for _, k := range knobNames {
			row = append(row, t.Knobs[k])
		}
		if t.OK() {
			lo, hi := "", ""
			if t.Value.Bounded() {
				lo, hi = f(t.Value.Lo), f(t.Value.Hi)
			}
			row = append(row, s.Metric.Name, s.Metric.Unit, f(t.Value.Center), lo, hi, f(t.Value.Confidence), strconv.Itoa(t.Value.N))
			if c := t.VsBaseline; c != nil {
				clo, chi, p := "", "", ""
				if c.Bounded() {
					clo, chi, p = f(c.Lo), f(c.Hi), f(c.P)
				}
				row = append(row, f(c.Ratio), clo, chi, p, c.VerdictText())
			} else {
				row = append(row, "", "", "", "", "")
			}
			row = append(row, f(t.Throughput.Center), f(t.TokensPerS), f(t.StepMS.Median), f(t.StepMS.P10), f(t.StepMS.P90),
				cvCell(t.CV, f), strconv.FormatBool(t.Noisy), f(t.MFU), f(t.MFUBF16), f(t.TFLOPS), strconv.FormatInt(t.MemPeakBytes, 10), memHeldCSV(&t), f(t.FinalLoss))
			b := t.Breakdown
			if b == nil {
				b = &Breakdown{}
			}
			row = append(row, f(b.ForwardMS), f(b.BackwardMS), f(b.OptimizerMS), f(b.ExposedCommMS), f(b.BubbleMS), f(b.OtherMS), f(b.TPCommMS))
		} else {
			row = append(row, slicesRepeat("", 32)...)
		}
		row = append(row, t.Error, t.Command)
		if err := cw.Write(csvSafe(row)); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

// cvCell is the launch CV, empty below two launches.
func cvCell(cv *float64, f func(float64) string) string {
	if cv == nil {
		return ""
	}
	return f(*cv)
}
