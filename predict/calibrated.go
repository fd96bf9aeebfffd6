package predict

import (
	"fmt"
	"sort"
)

// CalibratedBucket is one bucket size's collective as the stretch
// calibration timed it: on the calibration's group of ranks, issued as the
// trial's reducer issues it, beside the trial's own backward (or after it,
// where the trial's schedule puts it); the median over the loaded steps.
type CalibratedBucket struct {
	Op    string  `json:"op"`
	Bytes int64   `json:"bytes"`
	MS    float64 `json:"ms"`
	Steps int     `json:"steps"` // loaded steps it is the median of
	// MeanMS is the mean of the same times: above MS where a few collectives
	// stall for milliseconds (docs/predict.md, "The collectives' tail").
	MeanMS float64 `json:"mean_ms,omitempty"`
	// Times are the measured times themselves, ascending: the spread each
	// simulated step draws from (Sampled; Options.CollectiveDraws). Not
	// written: predicted.json keeps MS, MeanMS and Steps.
	Times []float64 `json:"-"`
}

// A Sampled cost model also holds each collective's measured times (their
// spread, not only a central value): Samples gives them ascending, or nil
// where the model has none for that op, size and rank count.
type Sampled interface {
	Samples(op string, bytes int64, ranks int) []float64
}

// Calibrated is a trial's collective cost model from its stretch
// calibration: each of its bucket sizes at the time the calibration measured
// on a group of Ranks; any other op, size or rank count asks Fallback (the
// benchmark's fit). The collectives ran on the rank's own CPU beside its
// compute, as a rank's do, on a group whose other members only communicate
// (no other rank's compute, no skew: the rank draws add those).
type Calibrated struct {
	Ranks    int
	Buckets  []CalibratedBucket
	Fallback CostModel
}

// Time is the calibrated time of a bucket of bytes, else Fallback's.
func (c Calibrated) Time(op string, bytes int64, ranks int) (float64, string, error) {
	if b := c.bucket(op, bytes, ranks); b != nil {
		return b.MS, "calibrated", nil
	}
	if c.Fallback == nil {
		return 0, "", fmt.Errorf("no calibrated %s of %d bytes on %d ranks and no fallback model", op, bytes, ranks)
	}
	return c.Fallback.Time(op, bytes, ranks)
}

// Samples are the calibration's measured times of a bucket of bytes,
// ascending (nil: none; Time then asks Fallback).
func (c Calibrated) Samples(op string, bytes int64, ranks int) []float64 {
	if b := c.bucket(op, bytes, ranks); b != nil {
		return b.Times
	}
	return nil
}

// bucket is the calibrated bucket of op and bytes on ranks (nil: none, or
// no time), the one lookup of Time and Samples.
func (c Calibrated) bucket(op string, bytes int64, ranks int) *CalibratedBucket {
	if ranks != c.Ranks {
		return nil
	}
	for i, b := range c.Buckets {
		if b.Op == op && b.Bytes == bytes && b.MS > 0 {
			return &c.Buckets[i]
		}
	}
	return nil
}

// Name says what the model is.
func (c Calibrated) Name() string {
	fb := "none"
	if c.Fallback != nil {
		fb = c.Fallback.Name()
	}
	return fmt.Sprintf("the trial's buckets as timed by its stretch calibration on %d ranks (other sizes: %s)", c.Ranks, fb)
}

// calibratedBuckets is the median (and mean) time of each (op, bytes) over
// the loaded steps' buckets, with the times themselves.
func calibratedBuckets(steps [][]Bucket) []CalibratedBucket {
	type key struct {
		op    string
		bytes int64
	}
	ms := map[key][]float64{}
	for _, s := range steps {
		for _, b := range s {
			if b.MS > 0 && b.Bytes > 0 {
				k := key{b.Op, b.Bytes}
				ms[k] = append(ms[k], b.MS)
			}
		}
	}
	var out []CalibratedBucket
	for k, v := range ms {
		sort.Float64s(v)
		out = append(out, CalibratedBucket{Op: k.op, Bytes: k.bytes, MS: Median(v), Steps: len(v), MeanMS: mean(v), Times: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes < out[j].Bytes
		}
		return out[i].Op < out[j].Op
	})
	return out
}
