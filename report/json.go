package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/casestudy/casestudy/store"
)

// WriteJSON writes s as indented JSON (summary.json or a baseline file).
func WriteJSON(w io.Writer, s *Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}

// ReadSummary reads a summary.json or baseline file and checks its schema
// and what compare trusts in it (checkSummary: a SummaryError, exit status 2).
func ReadSummary(path string) (*Summary, error) {
	b, err := store.ReadRegular(path, store.ManifestLimit) // not a FIFO or a device (audit N8)
	if err != nil {
		return nil, err
	}
	var s Summary
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: not a casestudy summary or baseline file: %w", path, err)
	}
	switch {
	case s.Schema == 0:
		return nil, fmt.Errorf("%s: no \"schema\" field: not a casestudy summary or baseline file (write one with casestudy baseline RUN_DIR -o FILE)", path)
	case s.Schema > SchemaVersion:
		return nil, fmt.Errorf("%s: schema %d is newer than this casestudy understands (%d): upgrade casestudy", path, s.Schema, SchemaVersion)
	case s.Kind == "":
		return nil, fmt.Errorf("%s: no \"kind\" field: not a casestudy summary or baseline file (write one with casestudy baseline RUN_DIR -o FILE)", path)
	case s.Kind == KindRehearsal:
		return nil, fmt.Errorf("%s is the summary of a rehearsal (%s): compare, export and baselines take measured runs only", path, store.RehearsalNote)
	case s.Kind != KindSummary && s.Kind != KindBaseline:
		return nil, fmt.Errorf("%s: \"kind\" is %q, want %q or %q", path, s.Kind, KindSummary, KindBaseline)
	}
	if err := checkSummary(path, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// sanitize replaces values JSON cannot hold (NaN, ±Inf in plain fields) with
// 0 and says so in the trial's warnings.
func sanitize(t *Trial) {
	fix := func(name string, v *float64) {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			t.Warnings = append(t.Warnings, fmt.Sprintf("%s is %v; recorded as 0", name, *v))
			*v = 0
		}
	}
	fix("final loss", &t.FinalLoss)
	fix("MFU", &t.MFU)
	fix("TFLOP/s", &t.TFLOPS)
	if t.CV != nil {
		fix("CV", t.CV)
	}
	fix("step CV", &t.StepCV)
	fix("repeat CV", &t.RepeatCV)
	fix("tokens/s", &t.TokensPerS)
}
