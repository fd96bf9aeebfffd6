package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/casestudy/casestudy/stats"
)

// Num formats a measurement with 3-4 significant digits and no exponent for
// everyday magnitudes: 12345 -> "12345", 123.456 -> "123.5", 0.01234 -> "0.01234".
func Num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	case v == 0:
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// Interval is "lo–hi" of an estimate, or "no CI" when unbounded.
func Interval(e stats.Estimate) string {
	if !e.Bounded() {
		return "no CI"
	}
	return Num(e.Lo) + "–" + Num(e.Hi)
}

// PctRange is the half-width of an estimate's interval relative to its
// median, benchstat style: "±3%", or "±∞".
func PctRange(e stats.Estimate) string {
	if !e.Bounded() || e.Center == 0 {
		return "±∞"
	}
	return fmt.Sprintf("±%.0f%%", 100*math.Max(e.Hi/e.Center-1, 1-e.Lo/e.Center))
}

// Ratio is "1.42×".
func Ratio(r float64) string { return fmt.Sprintf("%.2f×", r) }

// RatioCI is "90% CI 1.35–1.50×" or "CI unbounded: too few samples".
func RatioCI(s stats.Speedup) string {
	if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		return "no confidence interval: too few samples"
	}
	return fmt.Sprintf("%.0f%% CI %.2f–%.2f×", 100*math.Floor(s.Confidence*100)/100, s.Lo, s.Hi)
}

// SignificanceText is "p=0.002, significant" or "p=0.40, not significant (~)".
func SignificanceText(p float64, significant bool) string {
	if significant {
		if p < 0.001 {
			return "p<0.001, significant"
		}
		return fmt.Sprintf("p=%.3f, significant", p)
	}
	return fmt.Sprintf("p=%.2f, not significant (~)", p)
}

// Percent is 0.4123 -> "41.2%".
func Percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// SI is a large count with a metric prefix: 508754 -> "508.8k", 1.2e6 -> "1.20M".
func SI(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return Num(v)
}
