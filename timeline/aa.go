package timeline

import (
	"fmt"
	"math"

	mstats "github.com/aclements/go-moremath/stats"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// AA is the A/A test of overlap (casestudy run --overlap aa): the launches of
// one run, clean and ok, grouped by whether they were prepared ahead and
// whether they hosted the next launch's preparation, compared by throughput.
// Each launch counts as ln(throughput) minus its trial's mean, so trials of
// different speeds pool.
type AA struct {
	// Limit is the disturbance the test must rule out: half the run's
	// compare threshold δ, so that overlap cannot move a comparison by more
	// than half of what the study calls a difference.
	Limit       float64        `json:"limit"`
	Comparisons []AAComparison `json:"comparisons"`
	// MaxInWindowMS is the longest a preparation ran inside a hosting
	// launch's measured window (0: preparation always ended before measuring).
	MaxInWindowMS float64 `json:"max_in_window_ms"`
	Verdict       string  `json:"verdict"` // AANoDisturbance | AADisturbs | AAUndecided
}

// AAComparison is one group of launches against another: the ratio of their
// geometric-mean throughputs with Welch's 95% interval on the log scale.
type AAComparison struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	NRef    int     `json:"n_ref"`
	Ratio   float64 `json:"ratio"`
	Lo      float64 `json:"lo,omitempty"` // 0: no interval (fewer than two launches a side)
	Hi      float64 `json:"hi,omitempty"`
	Verdict string  `json:"verdict"`
}

// aaModes are the overlap modes of an A/A run (casestudy run --overlap aa or
// aa-tail); "" is a record from before the mode was recorded.
var aaModes = map[string]bool{"": true, "aa": true, "aa-tail": true}

// A/A verdicts.
const (
	AANoDisturbance = "no disturbance"
	AADisturbs      = "disturbs"
	AAUndecided     = "undecided: more launches"
)

// CompareOverlap runs the A/A comparison of a run; nil when it is not an
// A/A run: a launch records another overlap mode than aa or aa-tail, or its
// launches do not come in both kinds.
func CompareOverlap(run *store.Run, threshold float64) *AA {
	type launch struct {
		y             float64
		ahead, hosted bool
	}
	var ls []launch
	a := &AA{Limit: threshold / 2}
	for _, rec := range run.Trials {
		var ys []float64
		var trial []launch
		for _, rp := range rec.Repeats {
			if rp.Overlap != nil && !aaModes[rp.Overlap.Mode] {
				return nil
			}
			if rp.Overlap == nil || rp.Outcome != store.OK || rp.Tainted != "" || rp.SamplesPerS <= 0 {
				continue
			}
			a.MaxInWindowMS = max(a.MaxInWindowMS, rp.Overlap.InWindowMS)
			y := math.Log(rp.SamplesPerS)
			ys = append(ys, y)
			trial = append(trial, launch{y, rp.Overlap.PreparedAhead, rp.Overlap.NextPrepared})
		}
		if len(ys) < 2 {
			continue
		}
		m := mstats.Mean(ys)
		for _, l := range trial {
			l.y -= m
			ls = append(ls, l)
		}
	}
	pick := func(f func(launch) bool) []float64 {
		var out []float64
		for _, l := range ls {
			if f(l) {
				out = append(out, l.y)
			}
		}
		return out
	}
	hosted, notHosted := pick(func(l launch) bool { return l.hosted }), pick(func(l launch) bool { return !l.hosted })
	ahead, notAhead := pick(func(l launch) bool { return l.ahead }), pick(func(l launch) bool { return !l.ahead })
	if len(hosted) == 0 || len(notHosted) == 0 || len(ahead) == 0 || len(notAhead) == 0 {
		return nil
	}
	a.Comparisons = []AAComparison{
		a.compare("hosting the next launch's preparation vs not", hosted, notHosted),
		a.compare("prepared ahead vs started after the previous launch", ahead, notAhead),
		a.compare("both (overlap) vs neither (no overlap)",
			pick(func(l launch) bool { return l.ahead && l.hosted }), pick(func(l launch) bool { return !l.ahead && !l.hosted })),
	}
	a.Verdict = AANoDisturbance
	for _, c := range a.Comparisons[:2] { // the third has a quarter of the launches a side: shown, not decisive
		switch {
		case c.Verdict == AADisturbs:
			a.Verdict = AADisturbs
		case c.Verdict != AANoDisturbance && a.Verdict != AADisturbs:
			a.Verdict = AAUndecided
		}
	}
	return a
}

// compare is x against ref with stats.Compare's interval (Welch's t on the
// log scale), judged as an equivalence test: no disturbance when the
// interval lies inside [1/(1+limit), 1+limit] (an effect, if any, smaller
// than what matters), disturbs when it reaches outside and excludes 1, else
// undecided.
func (a *AA) compare(name string, x, ref []float64) AAComparison {
	exp := func(ys []float64) []float64 {
		out := make([]float64, len(ys))
		for i, y := range ys {
			out[i] = math.Exp(y)
		}
		return out
	}
	c := stats.Compare(exp(x), exp(ref), stats.Metrics["throughput"], stats.Level{Confidence: 0.95, Threshold: a.Limit})
	out := AAComparison{Name: name, N: len(x), NRef: len(ref), Ratio: c.Ratio, Verdict: AAUndecided}
	if !c.Bounded() {
		return out
	}
	out.Lo, out.Hi = c.Lo, c.Hi
	switch {
	case c.Lo >= 1/(1+a.Limit) && c.Hi <= 1+a.Limit:
		out.Verdict = AANoDisturbance
	case c.Lo > 1 || c.Hi < 1:
		out.Verdict = AADisturbs
	}
	return out
}

func (c AAComparison) String() string {
	if c.Lo == 0 {
		return fmt.Sprintf("%s: %.3f×, no interval (%d vs %d launches): %s", c.Name, c.Ratio, c.N, c.NRef, c.Verdict)
	}
	return fmt.Sprintf("%s: %.3f× [%.3f, %.3f] (%d vs %d launches): %s", c.Name, c.Ratio, c.Lo, c.Hi, c.N, c.NRef, c.Verdict)
}
