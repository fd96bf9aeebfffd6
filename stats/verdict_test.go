package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/stats/synth"
)

// TestEquivalenceFirstRows: the rule of docs/reports.md on constructed
// intervals (δ = 5%, U = 1.05, L = 0.952), one per row of the table, the
// H100 examples of the review among them.
func TestEquivalenceFirstRows(t *testing.T) {
	tests := []struct {
		name          string
		r, lo, hi     float64
		verdict       Verdict
		practical     Practical
		text          string
		winner, loser bool
	}{
		{"grad_accum=4: inside, excludes 1", 1.025, 1.020, 1.030, NoDifference, Within, "within ±5% (measurably faster, +2.0 to +3.0%)", false, false},
		{"graphs=false: inside, below 1", 0.975, 0.969, 0.980, NoDifference, Within, "within ±5% (measurably slower, −2.0 to −3.2%)", false, false},
		{"inside, below 1", 0.998, 0.9968, 0.9994, NoDifference, Within, "within ±5% (measurably slower, −0.1 to −0.3%)", false, false},
		{"inside, straddles 1", 1.0, 0.99, 1.01, NoDifference, Within, "within ±5%", false, false},
		{"micro_batch=32: beyond", 1.147, 1.139, 1.155, Better, Beyond, "faster by more than 5%", true, false},
		{"fp32: beyond below", 0.12, 0.11, 0.13, Worse, Beyond, "slower by more than 5%", false, true},
		{"faster, edge inside", 1.05, 1.02, 1.08, Better, Unresolved, "faster, by 2.0–8.0% (more than 5% not shown", false, false},
		{"slower, edge inside", 0.95, 0.92, 0.98, Worse, Unresolved, "slower, by 2.0–8.7% (more than 5% not shown", false, false},
		{"straddles 1 and an edge", 1.02, 0.98, 1.07, Undecided, "", "undecided", false, false},
		{"exactly on the edges", 1.0, 1 / 1.05, 1.05, NoDifference, Within, "within ±5%", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Comparison{Metric: throughputMetric, Ratio: tt.r, Lo: tt.lo, Hi: tt.hi, Threshold: 0.05, NTrial: 5, NBase: 5}
			c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
			assert.Equal(t, tt.verdict, c.Verdict)
			assert.Equal(t, tt.practical, c.Practical)
			assert.Contains(t, c.VerdictText(), tt.text)
			assert.Equal(t, tt.winner, c.Winner())
			assert.Equal(t, tt.loser, c.Loser())
			assert.Equal(t, tt.practical == Within || tt.practical == Beyond, c.Settled())
		})
	}
	// memory words
	c := Comparison{Metric: Metrics["memory"], Ratio: 1.2, Lo: 1.1, Hi: 1.3, Threshold: 0.05, NTrial: 3, NBase: 3}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
	assert.Equal(t, "less memory by more than 5%", c.VerdictText())
}

// TestHolmFallsBackToBand: a faster verdict that fails Holm is undecided,
// a within-δ one is untouched.
func TestHolmFallsBackToBand(t *testing.T) {
	in := Comparison{Metric: throughputMetric, Ratio: 0.998, Lo: 0.9968, Hi: 0.9995, Threshold: 0.05, NTrial: 5, NBase: 5}
	in.Verdict, in.Practical = verdictOf(in.Lo, in.Hi, in.Threshold)
	assert.Equal(t, NoDifference, Corrected(in, false).Verdict)
	out := Comparison{Metric: throughputMetric, Ratio: 1.05, Lo: 1.02, Hi: 1.08, Threshold: 0.05, NTrial: 5, NBase: 5}
	out.Verdict, out.Practical = verdictOf(out.Lo, out.Hi, out.Threshold)
	got := Corrected(out, false)
	assert.Equal(t, Undecided, got.Verdict)
	assert.Equal(t, Practical(""), got.Practical)
	assert.Equal(t, Better, Corrected(out, true).Verdict)
	// an in-band interval handed in with an old faster verdict falls back to the band
	old := in
	old.Verdict, old.Practical = Worse, Unresolved
	assert.Equal(t, NoDifference, Corrected(old, false).Verdict)
}

// TestRatioTextDecimals: enough decimals to keep the interval's ends apart.
func TestRatioTextDecimals(t *testing.T) {
	c := Comparison{Ratio: 1.0855, Lo: 1.0850, Hi: 1.0859}
	assert.Equal(t, "1.0855× [1.0850, 1.0859]", c.RatioText())
	c = Comparison{Ratio: 1.147, Lo: 1.139, Hi: 1.155} // two decimals keep these apart
	assert.Equal(t, "1.15× [1.14, 1.16]", c.RatioText())
	c = Comparison{Ratio: 1.24, Lo: 1.13, Hi: 1.38}
	assert.Equal(t, "1.24× [1.13, 1.38]", c.RatioText())
}

// TestOneLaunchHasNoRankTest: Mann-Whitney at 1 vs 1 is not a p of 1.
func TestOneLaunchHasNoRankTest(t *testing.T) {
	c := Compare([]float64{100}, []float64{90}, throughputMetric, Level{Confidence: 0.95, Threshold: 0.05})
	assert.True(t, math.IsNaN(c.MannWhitneyP))
	b, err := c.MarshalJSON()
	assert.NoError(t, err)
	assert.Contains(t, string(b), `"mann_whitney_p":null`)
	assert.Contains(t, string(b), `"practical":null`)
}

// TestSimulatedFamilyWiseBeyond: A/A studies of 9 alternatives equal to the
// baseline at the shipped design (auto 5-12): some row of the table says
// "faster/slower by more than 5%" in at most 5% of studies, at the H100's
// noise and at the H200-calibrated noise (synth.Typical).
func TestSimulatedFamilyWiseBeyond(t *testing.T) {
	n := reps(150)
	d := AutoDesign(5, 12)
	for _, m := range []struct {
		name  string
		model synth.Model
	}{{"H100", synth.H100}, {"H200 typical", synth.Typical}} {
		models := make([]synth.Model, 10)
		for i := range models {
			models[i] = m.model
		}
		r := rand.New(rand.NewPCG(11, uint64(len(m.name))))
		anyBeyond, anyFaster := 0, 0
		for range n {
			res := simulate(r, d, 0.05, models, false)
			b, f := false, false
			for i, v := range res.verdicts {
				b = b || (v != NoDifference && v != Undecided && res.practical[i] == Beyond)
				f = f || v == Better || v == Worse
			}
			if b {
				anyBeyond++
			}
			if f {
				anyFaster++
			}
		}
		rate := float64(anyBeyond) / float64(n)
		t.Logf("A/A, 9 rows, %-12s auto 5-12: some row beyond 5%% in %4.1f%% of studies (faster/slower of any size %4.1f%%)",
			m.name, 100*rate, 100*float64(anyFaster)/float64(n))
		assert.LessOrEqual(t, rate, 0.05, m.name)
	}
}

// TestCorrectedBeyond: "by more than δ" as one of a family. BeyondP reads
// the one-sided p against the band's edge off the row's own interval (its
// lower end at 1+δ is p = 5%); a row beyond the band whose test does not
// survive Holm keeps its direction with the size unresolved, in the words of
// row 4 of the table.
func TestCorrectedBeyond(t *testing.T) {
	c := Compare([]float64{110, 110.5, 109.5}, []float64{100, 100.5, 99.5}, throughputMetric, Level{Confidence: 0.9, Threshold: 0.05, Pooled: true})
	assert.True(t, c.Winner(), c.Text())
	better, worse := c.BeyondP()
	assert.Less(t, better, 0.05)
	assert.Greater(t, worse, 0.99)
	edge := c
	edge.Lo = 1.05
	edge.Hi = c.Ratio * c.Ratio / edge.Lo
	better, _ = edge.BeyondP()
	assert.InDelta(t, 0.05, better, 1e-9, "a 90% interval's lower end on 1+δ")

	assert.Equal(t, c, CorrectedBeyond(c, true, false))
	kept := CorrectedBeyond(c, false, false)
	assert.False(t, kept.Winner())
	assert.Equal(t, Better, kept.Verdict)
	assert.Contains(t, kept.VerdictText(), "faster, by ")
	assert.Contains(t, kept.VerdictText(), "(more than 5% not shown")
	assert.Contains(t, kept.VerdictText(), "Holm")

	exact := Compare([]float64{2, 2}, []float64{1, 1}, Metrics["memory"], Level{Confidence: 0.9, Threshold: 0.05, Pooled: true})
	better, worse = exact.BeyondP()
	assert.Equal(t, []float64{1, 0}, []float64{better, worse}, "twice the memory: exactly worse by more than δ")
	one := Compare([]float64{110}, []float64{100}, throughputMetric, Level{Confidence: 0.9, Threshold: 0.05, Pooled: true})
	better, _ = one.BeyondP()
	assert.True(t, math.IsNaN(better), "one launch: no test")
}

// "slower by p%" is in the band's unit: the faster side's rate 1+p times the
// slower's, so the slower range's top reaches past 5% exactly where the
// interval's lower bound passes the band's edge 1/1.05.
func TestSlowerPercentInTheBandsUnit(t *testing.T) {
	c := Comparison{Metric: throughputMetric, Ratio: 0.9506, Lo: 0.9502, Hi: 0.9510, Threshold: 0.05, NTrial: 5, NBase: 5}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
	assert.Equal(t, "slower by more than 5%", c.VerdictText())
	c = Comparison{Metric: throughputMetric, Ratio: 0.95, Lo: 0.9530, Hi: 0.9615, Threshold: 0.05, NTrial: 5, NBase: 5}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
	assert.Equal(t, "within ±5% (measurably slower, −4.0 to −4.9%)", c.VerdictText(), "1/0.9530 is 4.9% more time: inside the band")
}

// A row whose own interval lies beyond the band while Holm's correction over
// the rows left "by more than δ" unresolved says so, instead of quoting an
// interval past the edge with "more than 5% not shown" alone.
func TestVerdictTextNamesHolmWhereTheIntervalIsBeyond(t *testing.T) {
	c := Comparison{Metric: throughputMetric, Ratio: 1.13, Lo: 1.06, Hi: 1.21, Threshold: 0.05, NTrial: 3, NBase: 3}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
	c = CorrectedBeyond(c, false, false)
	assert.Equal(t, "faster, by 6.0–21.0% (more than 5% not shown after correcting for the number of comparisons (Holm))", c.VerdictText())
	c = Comparison{Metric: throughputMetric, Ratio: 1.05, Lo: 1.02, Hi: 1.08, Threshold: 0.05, NTrial: 3, NBase: 3}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, c.Threshold)
	assert.Equal(t, "faster, by 2.0–8.0% (more than 5% not shown)", c.VerdictText(), "an interval holding the edge needs no Holm")
}

// The interval's decimals keep each bound on its side of 1 and the band's
// edges: 0.9540 against the edge 0.9524 prints 0.954, not 0.95.
func TestRatioTextKeepsBoundsOnTheirSideOfTheEdges(t *testing.T) {
	c := Comparison{Metric: throughputMetric, Ratio: 0.9612, Lo: 0.9540, Hi: 0.9685, Threshold: 0.05, NTrial: 5, NBase: 5}
	assert.Equal(t, "0.961× [0.954, 0.969]", c.RatioText())
	c = Comparison{Metric: throughputMetric, Ratio: 1.0, Lo: 0.9980, Hi: 1.0021, Threshold: 0.05, NTrial: 5, NBase: 5}
	assert.Equal(t, "1.000× [0.998, 1.002]", c.RatioText(), "1.00 for 0.998 would put a bound on 1")
	c = Comparison{Metric: throughputMetric, Ratio: 1.24, Lo: 1.13, Hi: 1.38, Threshold: 0.05, NTrial: 5, NBase: 5}
	assert.Equal(t, "1.24× [1.13, 1.38]", c.RatioText())
}
