package stats

import (
	"encoding/json"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
	"gonum.org/v1/gonum/stat/distuv"
)

// Level is what a comparison is decided at.
type Level struct {
	// Confidence of the interval; 1-Confidence is the two-sided
	// false-positive rate of one look (0.95 for a fixed number of launches;
	// the sequential design's per-look level for repeats: auto).
	Confidence float64
	// Threshold is δ, the study's compare.threshold (0.05 = 5%): differences
	// inside [1/(1+δ), 1+δ] are "no difference larger than δ".
	Threshold float64
	// Pooled: both sides are the same configuration (compare's old and new
	// runs), so Student's t with a pooled variance (go-moremath) replaces
	// Welch's: under "nothing changed" the spreads are equal too, and its
	// n1+n2-2 degrees of freedom give a nightly gate its power at 3 launches
	// a side.
	Pooled bool
}

// Comparison is a trial against a reference (the baseline), launch by
// launch: the ratio of geometric means of the metric, oriented so that > 1 is
// better (for step time and memory: reference over trial), with Welch's t
// interval and test on y = ln value (unequal variances, launches as
// replicates), and the verdict against δ.
//
// The median ratio and Mann-Whitney p (golang.org/x/perf/benchmath) are kept
// as secondary numbers, as benchstat shows them; the verdict does not use
// them (a rank test cannot reach p < 0.1 with 3 launches a side).
type Comparison struct {
	Metric     Metric  `json:"metric"`
	Ratio      float64 `json:"ratio"`
	Lo         float64 `json:"lo"` // -Inf (null) when either side has one launch
	Hi         float64 `json:"hi"` // +Inf (null) likewise
	Confidence float64 `json:"confidence"`
	P          float64 `json:"p"`  // Welch two-sided; NaN (null) when not testable
	DF         float64 `json:"df"` // Welch-Satterthwaite degrees of freedom
	NTrial     int     `json:"n_trial"`
	NBase      int     `json:"n_base"`
	Threshold  float64 `json:"threshold"`
	Verdict    Verdict `json:"verdict"`
	// Practical places the interval against the band [1/(1+δ), 1+δ]:
	// within it, beyond it, or faster/slower with the band's edge inside the
	// interval (unresolved); "" (null) when undecided.
	Practical Practical `json:"practical"`
	// MoreLaunches estimates, for an undecided comparison with two launches
	// a side or more, how many more launches per side would decide it at the
	// current spread and effect (0: decided, or no spread to go by).
	MoreLaunches int    `json:"more_launches,omitempty"`
	Note         string `json:"note,omitempty"`

	MedianRatio  float64 `json:"median_ratio"`   // ratio of medians, oriented like Ratio
	MannWhitneyP float64 `json:"mann_whitney_p"` // benchmath's U test (secondary); NaN (null) below 2 launches a side
}

// Bounded reports whether the comparison has an interval.
func (c Comparison) Bounded() bool { return !math.IsInf(c.Lo, 0) && !math.IsInf(c.Hi, 0) }

// Decided reports whether the verdict is faster, slower or no difference.
func (c Comparison) Decided() bool { return c.Verdict != Undecided && c.Verdict != "" }

// Settled reports whether the comparison is decided against the band: within
// it or beyond it (repeats: auto stops such a trial; an unresolved faster or
// slower one continues).
func (c Comparison) Settled() bool { return c.Practical.Decided() }

// Compare compares a trial's launch values with the reference's.
func Compare(trial, base []float64, m Metric, lv Level) Comparison {
	c := compare(trial, base, m, lv)
	c.MannWhitneyP = math.NaN()
	if len(trial) > 0 && len(base) > 0 {
		c.MedianRatio, c.MannWhitneyP = medianRatio(trial, base, m)
		if len(trial) < 2 || len(base) < 2 {
			c.MannWhitneyP = math.NaN() // one launch a side cannot be tested
		}
	}
	return c
}

// compare is Compare without benchstat's secondary numbers (the schedule's
// looks need only the verdict).
func compare(trial, base []float64, m Metric, lv Level) Comparison {
	c := Comparison{Metric: m, Lo: math.Inf(-1), Hi: math.Inf(1), P: math.NaN(), Confidence: lv.Confidence,
		NTrial: len(trial), NBase: len(base), Threshold: lv.Threshold, Verdict: Undecided}
	if len(trial) == 0 || len(base) == 0 {
		c.Note = "nothing to compare: a side has no clean launch"
		return c
	}
	x, y := mstats.Sample{Xs: logs(trial)}, mstats.Sample{Xs: logs(base)}
	sign := 1.0
	if !m.HigherIsBetter {
		sign = -1
	}
	d := x.Mean() - y.Mean()
	c.Ratio = math.Exp(sign * d)
	if len(trial) < 2 || len(base) < 2 {
		c.Note = "one launch: estimate only, no interval and no p-value"
		return c
	}
	vx, vy := x.Variance(), y.Variance()
	nx, ny := float64(len(trial)), float64(len(base))
	if vx == 0 && vy == 0 { // a deterministic metric (memory): the difference is exact
		c.Lo, c.Hi, c.DF = c.Ratio, c.Ratio, nx+ny-2
		c.P = 1
		if d != 0 {
			c.P = 0
		}
		c.Note = "no launch-to-launch variation: the difference is exact"
	} else {
		_, hw, p, df, err := welch(x, y, lv.Confidence, lv.Pooled)
		if err != nil { // unreachable: sizes and variance checked above
			c.Note = err.Error()
			return c
		}
		c.P, c.DF = p, df
		c.Lo, c.Hi = math.Exp(sign*d-hw), math.Exp(sign*d+hw)
	}
	c.Verdict, c.Practical = verdictOf(c.Lo, c.Hi, lv.Threshold)
	if !c.Practical.Decided() {
		c.MoreLaunches = moreLaunches(vx, vy, d, lv, min(len(trial), len(base)))
	}
	return c
}

// welch is Welch's two-sample t test of mean(x) - mean(y) (go-moremath) with
// the half-width of its interval at the given confidence (gonum's Student t
// quantile at the Welch-Satterthwaite degrees of freedom); pooled, Student's
// test with a pooled variance.
func welch(x, y mstats.Sample, confidence float64, pooled bool) (d, hw, p, df float64, err error) {
	nx, ny := float64(len(x.Xs)), float64(len(y.Xs))
	var res *mstats.TTestResult
	var se float64
	if pooled {
		res, err = mstats.TwoSampleTTest(x, y, mstats.LocationDiffers)
		sp2 := ((nx-1)*x.Variance() + (ny-1)*y.Variance()) / (nx + ny - 2)
		se = math.Sqrt(sp2 * (1/nx + 1/ny))
	} else {
		res, err = mstats.TwoSampleWelchTTest(x, y, mstats.LocationDiffers)
		se = math.Sqrt(x.Variance()/nx + y.Variance()/ny)
	}
	if err != nil {
		return 0, 0, 0, 0, err
	}
	d = x.Mean() - y.Mean()
	return d, tQuantile(confidence, res.DoF) * se, res.P, res.DoF, nil
}

// decide is the verdict of compare without the interval: the same rule
// through Student's t CDF instead of its quantile (the quantile's inverse
// incomplete beta dominates a simulation's time; the schedule's looks need
// only the verdict). The interval [d-h, d+h] on ln ratio, h = q·se, is
// inside the band when h <= ln(1+δ)-|d|, beyond it when h < |d|-ln(1+δ),
// and excludes 1 when h < |d|.
func decide(trial, base []float64, lv Level) (Verdict, Practical) {
	if len(trial) < 2 || len(base) < 2 {
		return Undecided, ""
	}
	x, y := mstats.Sample{Xs: logs(trial)}, mstats.Sample{Xs: logs(base)}
	vx, vy := x.Variance(), y.Variance()
	nx, ny := float64(len(trial)), float64(len(base))
	d := x.Mean() - y.Mean()
	if vx == 0 && vy == 0 {
		return verdictOf(math.Exp(d), math.Exp(d), lv.Threshold)
	}
	se2x, se2y := vx/nx, vy/ny
	se := math.Sqrt(se2x + se2y)
	df := (se2x + se2y) * (se2x + se2y) / (se2x*se2x/(nx-1) + se2y*se2y/(ny-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	upper := 1 - (1-lv.Confidence)/2
	band := math.Log(1 + math.Max(lv.Threshold, 0))
	dir := Better
	if d < 0 {
		dir = Worse
	}
	switch {
	case t.CDF((band-math.Abs(d))/se) >= upper:
		return NoDifference, Within
	case t.CDF((math.Abs(d)-band)/se) > upper:
		return dir, Beyond
	case t.CDF(math.Abs(d)/se) > upper:
		return dir, Unresolved
	}
	return Undecided, ""
}

// verdictOf is the verdict rule on an oriented interval [lo, hi],
// equivalence first (docs/reports.md): inside [L, U] = [1/(1+δ), 1+δ] is
// "within δ" whatever it says about 1; lo > U or hi < L is faster or slower
// by more than δ; an interval that excludes 1 but holds a band edge is
// faster or slower with its size against δ unresolved; anything else is
// undecided.
func verdictOf(lo, hi, delta float64) (Verdict, Practical) {
	delta = math.Max(delta, 0)
	u, l := 1+delta, 1/(1+delta)
	switch {
	case lo >= l && hi <= u:
		return NoDifference, Within
	case lo > u:
		return Better, Beyond
	case hi < l:
		return Worse, Beyond
	case lo > 1:
		return Better, Unresolved
	case hi < 1:
		return Worse, Unresolved
	}
	return Undecided, ""
}

// maxMore caps the estimate of launches still needed.
const maxMore = 1000

// moreLaunches is how many more launches per side would make the interval
// narrow enough to decide against the band, if the spreads and the effect
// stayed as measured: narrower than the distance of |d| from the nearer band
// edge, |ln(1+δ)-|d||, so that it fits inside the band or clears it. It
// searches the smallest n per side whose Welch half-width
// q(df)·sqrt((vx+vy)/n) is below that target.
func moreLaunches(vx, vy, d float64, lv Level, have int) int {
	target := math.Abs(math.Log(1+math.Max(lv.Threshold, 0)) - math.Abs(d))
	if target <= 0 || vx+vy == 0 {
		return 0
	}
	dfPer := (vx + vy) * (vx + vy) / (vx*vx + vy*vy) // Welch df per (n-1) with n a side
	for n := have + 1; n <= have+maxMore; n++ {
		if tQuantile(lv.Confidence, dfPer*float64(n-1))*math.Sqrt((vx+vy)/float64(n)) < target {
			return n - have
		}
	}
	return maxMore
}

// medianRatio is benchstat's view: the ratio of medians (oriented) and the
// Mann-Whitney U p-value.
func medianRatio(trial, base []float64, m Metric) (ratio, p float64) {
	d := MannWhitney(base, trial)
	if d.Old == 0 || d.New == 0 {
		return 0, d.P
	}
	if m.HigherIsBetter {
		return d.New / d.Old, d.P
	}
	return d.Old / d.New, d.P
}

type comparisonJSON struct {
	Metric       Metric   `json:"metric"`
	Ratio        float64  `json:"ratio"`
	Lo           *float64 `json:"lo"`
	Hi           *float64 `json:"hi"`
	Confidence   float64  `json:"confidence"`
	P            *float64 `json:"p"`
	DF           float64  `json:"df"`
	NTrial       int      `json:"n_trial"`
	NBase        int      `json:"n_base"`
	Threshold    float64  `json:"threshold"`
	Verdict      Verdict  `json:"verdict"`
	Practical    *string  `json:"practical"`
	VerdictText  string   `json:"verdict_text"`
	MoreLaunches int      `json:"more_launches,omitempty"`
	Note         string   `json:"note,omitempty"`
	MedianRatio  float64  `json:"median_ratio"`
	MannWhitneyP *float64 `json:"mann_whitney_p"` // null when not testable (one launch on a side)
}

// MarshalJSON writes missing bounds and p as null, and the verdict's words.
func (c Comparison) MarshalJSON() ([]byte, error) {
	return json.Marshal(comparisonJSON{Metric: c.Metric, Ratio: finite(c.Ratio), Lo: bound(c.Lo), Hi: bound(c.Hi),
		Confidence: c.Confidence, P: bound(c.P), DF: finite(c.DF), NTrial: c.NTrial, NBase: c.NBase,
		Threshold: c.Threshold, Verdict: c.Verdict, Practical: c.Practical.json(), VerdictText: c.VerdictText(),
		MoreLaunches: c.MoreLaunches, Note: c.Note, MedianRatio: finite(c.MedianRatio), MannWhitneyP: bound(c.MannWhitneyP)})
}

// UnmarshalJSON reads null bounds as infinite and a null p as NaN.
func (c *Comparison) UnmarshalJSON(b []byte) error {
	var j comparisonJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Comparison{Metric: j.Metric, Ratio: j.Ratio, Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: j.Confidence,
		P: math.NaN(), DF: j.DF, NTrial: j.NTrial, NBase: j.NBase, Threshold: j.Threshold, Verdict: j.Verdict,
		MoreLaunches: j.MoreLaunches, Note: j.Note, MedianRatio: j.MedianRatio, MannWhitneyP: math.NaN()}
	if j.Practical != nil {
		c.Practical = Practical(*j.Practical)
	}
	if j.MannWhitneyP != nil {
		c.MannWhitneyP = *j.MannWhitneyP
	}
	if j.Lo != nil {
		c.Lo = *j.Lo
	}
	if j.Hi != nil {
		c.Hi = *j.Hi
	}
	if j.P != nil {
		c.P = *j.P
	}
	return nil
}
