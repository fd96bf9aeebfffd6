// Package units formats quantities for people, the same way in every report,
// checklist message and table.
package units

import "fmt"

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
