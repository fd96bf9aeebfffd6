package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCSVSafe (audit N18, A-9): formula-like text cells get an apostrophe;
// numbers, including negative ones, and ordinary text stay as they are.
func TestCSVSafe(t *testing.T) {
	got := csvSafe([]string{"=HYPERLINK(\"x\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+1", "-cmd", "\tx", "-0.5", "1e-3", "fp32", "", "a=b"})
	assert.Equal(t, []string{"'=HYPERLINK(\"x\")", "'@SUM(1+1)*cmd|' /C calc'!A0", "'+1+1", "'-cmd", "'\tx", "-0.5", "1e-3", "fp32", "", "a=b"}, got)
}
