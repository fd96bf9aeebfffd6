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
	if ranks == c.Ranks {
		for _, b := range c.Buckets {
			if b.Op == op && b.Bytes == bytes && b.MS > 0 {
				return b.MS, "calibrated", nil
			}
		}
	}
	if c.Fallback == nil {
		return 0, "", fmt.Errorf("no calibrated %s of %d bytes on %d ranks and no fallback model", op, bytes, ranks)
	}
	return c.Fallback.Time(op, bytes, ranks)
}

// Name says what the model is.
func (c Calibrated) Name() string {
	fb := "none"
	if c.Fallback != nil {
		fb = c.Fallback.Name()
	}
	return fmt.Sprintf("the trial's buckets as timed by its stretch calibration on %d ranks (other sizes: %s)", c.Ranks, fb)
}

// calibratedBuckets is the median time of each (op, bytes) over the loaded
// steps' buckets.
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
		out = append(out, CalibratedBucket{Op: k.op, Bytes: k.bytes, MS: Median(v), Steps: len(v)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes < out[j].Bytes
		}
		return out[i].Op < out[j].Op
	})
	return out
}
