package stats

import (
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// DefaultNoisyCV is the coefficient of variation (5%) above which a trial's
// step times or repeat throughputs are flagged noisy.
const DefaultNoisyCV = 0.05

// Describe is the descriptive statistics of a sample: median, p10, p90 and the
// coefficient of variation (sample standard deviation over mean; 0 for fewer
// than two values).
type Describe struct {
	Median, P10, P90, CV float64
}

// DescribeOf summarises xs (left untouched).
func DescribeOf(xs []float64) Describe {
	if len(xs) == 0 {
		return Describe{}
	}
	s := mstats.Sample{Xs: append([]float64(nil), xs...)}
	s.Sort()
	d := Describe{Median: s.Quantile(0.5), P10: s.Quantile(0.1), P90: s.Quantile(0.9)}
	if len(xs) > 1 {
		if m := s.Mean(); m != 0 {
			d.CV = s.StdDev() / math.Abs(m)
		}
	}
	return d
}
