package report

import (
	"image/color"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/timeline"
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

// methodSummary is a summary of k trials compared with the baseline, each
// side with n launches (n = 1: no interval, no verdict possible).
func methodSummary(d stats.Design, k, n int) *Summary {
	s := &Summary{Design: d, Confidence: 1 - d.LookAlpha, Metric: stats.Metric{Unit: "samples/s"}}
	s.Trials = append(s.Trials, Trial{ID: "base", Baseline: true})
	for i := 0; i < k; i++ {
		c := &stats.Comparison{Ratio: 1, Lo: 0.99, Hi: 1.01, NTrial: n, NBase: n}
		if n < 2 {
			c.Lo, c.Hi = math.Inf(-1), math.Inf(1)
		}
		s.Trials = append(s.Trials, Trial{ID: string(rune('a' + i)), VsBaseline: c})
	}
	return s
}

// TestMethodTextFalseVerdicts: the expected count of false verdicts is the
// comparisons times the rate the text states for each, α = 5% (not the
// per-look level of repeats: auto), and is not printed where no comparison
// can reach a verdict (one launch a side).
func TestMethodTextFalseVerdicts(t *testing.T) {
	auto := stats.AutoDesign(5, 20) // looks 5, 8, 12, 20: 1% per look
	txt := MethodText(methodSummary(auto, 7, 5))
	assert.Contains(t, txt, "peeking keeps the false-positive rate of each comparison at 5%")
	assert.Contains(t, txt, "The rate holds per comparison: with 7 comparisons expect up to 0.35 false verdicts when nothing changed.")

	fixed := MethodText(methodSummary(stats.FixedDesign(6, true), 4, 6))
	assert.Contains(t, fixed, "Design: 6 launches a trial. The false-positive rate of each comparison is 5%, and it holds per comparison: "+
		"with 4 comparisons expect up to 0.2 false verdicts when nothing changed.")

	for _, d := range []stats.Design{stats.FixedDesign(1, true), auto} {
		one := MethodText(methodSummary(d, 3, 1))
		assert.NotContains(t, one, "false verdicts", "one launch a side: no verdict, so no false one")
	}
	assert.Contains(t, MethodText(methodSummary(stats.FixedDesign(1, true), 3, 1)), "Design: 1 launch a trial.")

	mixed := methodSummary(auto, 3, 5)
	mixed.Trials = append(mixed.Trials, methodSummary(auto, 1, 1).Trials[1:]...)
	assert.Contains(t, MethodText(mixed), "with 3 comparisons that can reach a verdict (the others have one launch on a side) expect up to 0.15")
}

// TestLaunchCounts: one launch is "1 launch" wherever a count is printed.
func TestLaunchCounts(t *testing.T) {
	assert.Equal(t, "1 launch", nLaunches(1))
	assert.Equal(t, "6 launches", nLaunches(6))
	assert.Equal(t, "1 vs 1 launch", vsLaunches(1, 1))
	assert.Equal(t, "5 vs 1 launches", vsLaunches(5, 1))
	assert.Equal(t, "1 launch a trial", launchPlan(stats.FixedDesign(1, true)))
	assert.Equal(t, "1 vs 1 launch", headlineQualifier(stats.Comparison{Ratio: 1.2, Lo: math.Inf(-1), Hi: math.Inf(1), NTrial: 1, NBase: 1}, 3))

	w := &Measured{Family: "bert", Preset: "large", Warmup: 3, Steps: 24, LaunchesMin: 1, LaunchesMax: 1}
	assert.Contains(t, w.subtitle(), "3 warm-up + 24 steps; 1 launch")
	assert.NotContains(t, w.subtitle(), "launches")

	lines := strings.Join(timelineLines(&TimelineSection{Study: &timeline.Study{Launches: 1, WallMS: 2000, MeasuredMS: 500,
		Settle: &timeline.Settle{WarmupSteps: 5, Launches: 1, Max: 2, Median: 2}}}), " ")
	assert.Contains(t, lines, "1 launch took 2.0 s of wall time; its measured steps")
	assert.Contains(t, lines, "the one launch settled within the warm-up")
	assert.NotContains(t, lines, "launches")
}

// TestModelName: the preset is not repeated where the family's name ends in
// it: "resnet50", not "resnet50 50".
func TestModelName(t *testing.T) {
	w := &Measured{Family: "resnet50", Preset: "50", Params: 25_600_000}
	assert.Equal(t, "resnet50", w.modelName())
	assert.True(t, strings.HasPrefix(w.subtitle(), "resnet50 (25.6M)"), w.subtitle())
	assert.True(t, strings.HasPrefix(w.modelText(), "resnet50, 25.6M parameters"), w.modelText())
	assert.Equal(t, "resnet50 tiny", (&Measured{Family: "resnet50", Preset: "tiny"}).modelName())
	assert.Equal(t, "gpt 124m", (&Measured{Family: "gpt", Preset: "124m"}).modelName())
	assert.Equal(t, "bert", (&Measured{Family: "bert"}).modelName())
}
