package checklist

import (
	"fmt"
	"math"
	"strings"

	"github.com/casestudy/casestudy/internal/units"
)

// x formats a ratio: "1.93×".
func x(r float64) string { return fmt.Sprintf("%.2f×", r) }

// pct formats a fraction as a percentage: "12.5%".
func pct(f float64) string {
	if math.Abs(f) < 0.1 {
		return fmt.Sprintf("%.2f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// ms formats milliseconds.
func ms(v float64) string { return fmt.Sprintf("%.3g ms", v) }

// gib formats bytes as the reports do: "38.2 GiB", "25.0 MiB".
func gib(b float64) string { return units.Bytes(int64(b)) }

// gbs formats a bandwidth in GB/s.
func gbs(v float64) string { return fmt.Sprintf("%.1f GB/s", v) }

// num formats a threshold or knob number without trailing zeros.
func num(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0") }

// ids returns the IDs of trials.
func ids(ts ...*trial) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// limit keeps the first n lines and says how many were left out.
func limit(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("... and %d more", len(lines)-n))
}

func na(format string, args ...any) verdict {
	return verdict{Status: NotApplicable, Message: fmt.Sprintf(format, args...)}
}

func pass(format string, args ...any) verdict {
	return verdict{Status: Pass, Message: fmt.Sprintf(format, args...)}
}
