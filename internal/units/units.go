// Package units formats quantities for people, the same way in every report,
// checklist message and table.
package units

import (
	"fmt"
	"math"
	"strconv"
)

// Bytes is a binary-prefixed size with one decimal: 512 -> "512 B",
// 26214400 -> "25.0 MiB", 41015808819 -> "38.2 GiB".
func Bytes(b int64) string {
	const unit = 1024
	if b < unit && b > -unit {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b), -1
	for (v >= unit || v <= -unit) && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

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
