package checklist

import (
	"fmt"
	"math"
	"strconv"
)

// bound is the range of values a threshold accepts. A study's override outside
// it is an input error (Config.Problems): a negative max_cv or min_steps would
// otherwise change the check gate's findings without a word.
type bound struct {
	Min, Max         float64
	MinOpen, MaxOpen bool   // the end itself is excluded
	Integer          bool   // a whole number (a count)
	What             string // what the value is, for the message
}

// unitBounds gives each threshold unit its range. Fractions are shares
// strictly between 0 and 1 (0 or 1 would make the rule always or never fire:
// checklist.disable says that); speed-ups are ratios of at least 1 (below 1 a
// slower setting would be recommended); counts are whole numbers of at least 1.
// The upper ends follow the study's own limits (workload.steps <= 1000000,
// max_repeats <= 1000, ddp.bucket_mb <= 4096, pipeline.microbatches <= 1024,
// ranks <= 1024).
var unitBounds = map[string]bound{
	"fraction": {Min: 0, Max: 1, MinOpen: true, MaxOpen: true, What: "a fraction"},
	"x":        {Min: 1, Max: 100, What: "a speed-up ratio (1 = as fast)"},
	"x stages": {Min: 0, Max: 1024, MinOpen: true, What: "a multiple of the pipeline stages"},
	"count":    {Min: 1, Max: 1000000, Integer: true, What: "a count"},
	"steps":    {Min: 1, Max: 1000000, Integer: true, What: "a number of steps"},
	"launches": {Min: 1, Max: 1000, Integer: true, What: "a number of launches"},
	"ranks":    {Min: 1, Max: 1024, Integer: true, What: "a number of ranks"},
	"scale":    {Min: 0, Max: 1 << 32, MinOpen: true, What: "a loss scale"},
	"ms":       {Min: 0, Max: 3600000, MinOpen: true, What: "milliseconds"},
	"MiB":      {Min: 0, Max: 4096, MinOpen: true, What: "MiB"},
	"GB/s":     {Min: 0, Max: 100000, What: "GB/s (0: from the GPU model and topology)"},
}

// nameBounds overrides the unit's range for one threshold (rule/name).
var nameBounds = map[string]bound{
	// workload.warmup_steps may be 0, and so may the floor the rule checks
	"measurement-hygiene/min_warmup_steps": {Min: 0, Max: 100000, Integer: true, What: "a number of warm-up steps"},
}

// boundOf is the range of one threshold of rule r.
func (r *Rule) boundOf(t Threshold) (bound, bool) {
	if b, ok := nameBounds[r.ID+"/"+t.Name]; ok {
		return b, true
	}
	b, ok := unitBounds[t.Unit]
	return b, ok
}

// String writes the range: 1..1000 for whole numbers, (0, 1) or [1, 100]
// for the others.
func (b bound) String() string {
	if b.Integer {
		return boundNum(b.Min) + ".." + boundNum(b.Max)
	}
	lo, hi := "[", "]"
	if b.MinOpen {
		lo = "("
	}
	if b.MaxOpen {
		hi = ")"
	}
	return lo + boundNum(b.Min) + ", " + boundNum(b.Max) + hi
}

// check says what is wrong with v, "" when it is in range.
func (b bound) check(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64) + " is not a finite number: NaN and infinity are not allowed"
	case b.Integer && v != math.Trunc(v):
		return boundNum(v) + " is not a whole number"
	case v < b.Min || b.MinOpen && v == b.Min, v > b.Max || b.MaxOpen && v == b.Max:
		return fmt.Sprintf("%s is outside %s", boundNum(v), b)
	}
	return ""
}

// boundNum writes a threshold value as the study would: 0.05, 20, 1e+06 written out.
func boundNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
