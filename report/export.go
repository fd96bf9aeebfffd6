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
)

// Units of the benchfmt export. sec/op is a standard unit; samples/s is a
// custom one declared better=higher so benchstat reads a drop as a slowdown.
const (
	UnitStepTime   = "sec/op"
	UnitThroughput = "samples/s"
)

// WriteBenchfmt writes the Go benchmark format, so benchstat and its tooling
// read casestudy results unchanged. Each ok trial gives one result line per
// sample (per repeat, or per measured step for single-repeat trials), named
// Train/trial=<ID>, with the study, the sample source and every knob as
// configuration keys (not the run ID: benchstat tables group by the
// configuration, so two runs of a study must share it). Trials that did not finish have no lines. It returns
// the number of trials written.
func WriteBenchfmt(w io.Writer, s *Summary) (int, error) {
	bw := benchfmt.NewWriter(w)
	for _, m := range []*benchfmt.UnitMetadata{
		{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: UnitThroughput, Key: "better"}, OrigUnit: UnitThroughput, Value: "higher"},
		{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: UnitThroughput, Key: "assume"}, OrigUnit: UnitThroughput, Value: "nothing"},
		{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: UnitStepTime, Key: "assume"}, OrigUnit: UnitStepTime, Value: "nothing"},
	} {
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
		res.SetConfig("sample", string(t.Samples.Source))
		for _, k := range slices.Sorted(maps.Keys(t.Knobs)) {
			res.SetConfig(configKey(k), configValue(t.Knobs[k]))
		}
		for j := range res.Config {
			res.Config[j].File = true
		}
		tp, st := t.Samples.Throughput, t.Samples.StepMS
		for j := 0; j < max(len(tp), len(st)); j++ {
			res.Values = res.Values[:0]
			if j < len(st) {
				res.Values = append(res.Values, benchfmt.Value{Value: st[j] / 1000, Unit: UnitStepTime})
			}
			if j < len(tp) {
				res.Values = append(res.Values, benchfmt.Value{Value: tp[j], Unit: UnitThroughput})
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
// knob, throughput median and interval, step time, CV, MFU (at the trial's
// precision, and against the one bf16 peak), memory, breakdown.
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
	head = append(head, "samples_per_s", "ci_lo", "ci_hi", "ci_confidence", "n", "sample_source", "tokens_per_s",
		"step_ms_median", "step_ms_p10", "step_ms_p90", "cv", "noisy", "mfu", "mfu_bf16", "tflops", "mem_peak_bytes", "final_loss",
		"forward_ms", "backward_ms", "optimizer_ms", "exposed_comm_ms", "bubble_ms", "other_ms", "error", "command")
	cw := csv.NewWriter(w)
	if err := cw.Write(head); err != nil {
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
			if t.Throughput.Bounded() {
				lo, hi = f(t.Throughput.Lo), f(t.Throughput.Hi)
			}
			row = append(row, f(t.Throughput.Center), lo, hi, f(t.Throughput.Confidence), strconv.Itoa(t.Throughput.N),
				string(t.Samples.Source), f(t.TokensPerS), f(t.StepMS.Median), f(t.StepMS.P10), f(t.StepMS.P90),
				f(t.CV), strconv.FormatBool(t.Noisy), f(t.MFU), f(t.MFUBF16), f(t.TFLOPS), strconv.FormatInt(t.MemPeakBytes, 10), f(t.FinalLoss))
			b := t.Breakdown
			if b == nil {
				b = &Breakdown{}
			}
			row = append(row, f(b.ForwardMS), f(b.BackwardMS), f(b.OptimizerMS), f(b.ExposedCommMS), f(b.BubbleMS), f(b.OtherMS))
		} else {
			row = append(row, slicesRepeat("", 23)...)
		}
		row = append(row, t.Error, t.Command)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}
