package report

import (
	"image/color"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/stats"
)

// TestPctRangeKeepsInformation: tight GPU intervals no longer read "±0%",
// and wide asymmetric ones show their bounds instead of "±6427%".
func TestPctRangeKeepsInformation(t *testing.T) {
	assert.Equal(t, "±0.05%", PctRange(stats.Value{Center: 1000, Lo: 999.5, Hi: 1000.5, N: 5}))
	assert.Equal(t, "±0.4%", PctRange(stats.Value{Center: 1000, Lo: 996, Hi: 1004, N: 5}))
	assert.Equal(t, "±12%", PctRange(stats.Value{Center: 100, Lo: 88, Hi: 112, N: 5}))
	assert.Equal(t, "[0.24, 288.0]", PctRange(stats.Value{Center: 4.4, Lo: 0.24, Hi: 288, N: 3}))
	assert.Equal(t, "±∞", PctRange(stats.Value{Center: 4.4, N: 1}))
}

// TestWashOut: an undecided heatmap cell is paler than a decided one of the
// same ratio.
func TestWashOut(t *testing.T) {
	deep := color.RGBA{0, 60, 160, 255}
	lum := func(c color.Color) float64 {
		r, g, b, _ := c.RGBA()
		return 0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)
	}
	assert.Greater(t, lum(washOut(deep)), 2*lum(deep))
}
