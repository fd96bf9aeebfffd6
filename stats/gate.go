package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	mstats "github.com/aclements/go-moremath/stats"
	"gonum.org/v1/gonum/stat/distuv"
)

// The regression gate (casestudy compare): per trial, NEW against OLD, a
// one-sided test at GateAlpha of "NEW is no worse than 1/(1+δ) of OLD",
// Holm over the rows. It fails closed: a run passes only when at least one
// row was tested and every row's lower bound clears 1/(1+δ); what it cannot
// judge is inconclusive, never a pass (docs/reports.md, "The gate"). A trial
// that finished in OLD without a clean launch is such a row: with nothing to
// judge NEW against, passing it would pass whatever NEW measured.

// GateAlpha is the one-sided level of each row's test (a 90% two-sided
// interval: its lower end is the 95% one-sided bound).
const GateAlpha = 0.05

// MinHistory is the fewest earlier runs holding a trial that its history
// may speak for (a prediction interval from fewer is too wide to decide
// and its spread too uncertain to trust).
const MinHistory = 5

// GateState is a row's state.
type GateState string

const (
	GateRegression GateState = "regression" // slower by more than δ, confirmed (or it stopped finishing)
	GateSuspected  GateState = "suspected"  // the estimate is below 1/(1+δ), not confirmed
	GatePass       GateState = "pass"       // the lower bound clears 1/(1+δ)
	GateUndecided  GateState = "undecided"  // none of these
	GateNotJudged  GateState = "not_judged" // did not finish in OLD (nothing there to regress from)
)

// Outcomes of the gate as a whole.
const (
	GateFailed       = "regression"
	GateInconclusive = "inconclusive"
	GatePassed       = "pass"
)

// GateSide is what one run did with a trial.
type GateSide int

const (
	// SideFailed: it did not finish there (failed, crashed, not run).
	SideFailed GateSide = iota
	// SideUnmeasured: planned there but never measured (the run stopped
	// before it or was interrupted in it). In OLD it is undecided, not "not
	// judged", or a baseline written from an incomplete run would pass every
	// regression of the trials it lacks; in NEW it reads as failed.
	SideUnmeasured
	// SideTainted: it finished there without a clean launch (every launch
	// tainted: a throttled GPU, another process on it; or without the
	// metric). In NEW it is undecided, not a regression: it ran, and nothing
	// says how fast; in OLD undecided, not "not judged": there is a baseline
	// the gate cannot read. Failing in NEW after it is a regression.
	SideTainted
	// SideClean: it finished there with clean launches.
	SideClean
)

func (s GateSide) finished() bool { return s == SideTainted || s == SideClean }

// GateInput is one trial in both runs: launch values (objective, oriented
// by the metric), what each run did with it, and the trial's values in
// earlier comparable runs (one slice of launch values per run; nil for no
// history).
type GateInput struct {
	Name     string // how the summary line names it: its knobs and id
	Old, New []float64
	OldSide  GateSide
	NewSide  GateSide
	History  [][]float64
}

// GateRow is one trial's judgement.
type GateRow struct {
	State GateState `json:"state"`
	// Ratio is NEW over OLD oriented so that > 1 is better (against the
	// history's mean when judged by a prediction interval); Lo and Hi the
	// one-sided 95% bounds (a 90% interval), NaN (null) when there is none.
	Ratio float64 `json:"ratio"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	// P is the one-sided p-value of "ratio >= 1/(1+δ)"; NaN when untestable.
	P      float64 `json:"p"`
	DF     float64 `json:"df"`
	Method string  `json:"method"` // how the row was judged, in words
	// HistoryRuns is how many earlier runs informed the row (0: none).
	HistoryRuns int    `json:"history_runs"`
	Text        string `json:"text"` // the row in words
}

// GateResult is the gate over every row.
type GateResult struct {
	Outcome string    `json:"outcome"` // regression | inconclusive | pass
	Rows    []GateRow `json:"rows"`
	Line    string    `json:"line"` // the one-line summary
}

// Gate judges every row at threshold δ (a fraction) for metric m, Holm over
// the rows' one-sided tests.
func Gate(in []GateInput, m Metric, delta float64) GateResult {
	lt := math.Log(1 / (1 + delta))
	res := GateResult{Rows: make([]GateRow, len(in))}
	var ps []float64
	var idx []int
	for i, r := range in {
		res.Rows[i] = gateRow(r, m, lt)
		if p := res.Rows[i].P; !math.IsNaN(p) {
			ps, idx = append(ps, p), append(idx, i)
		}
	}
	rejected := Holm(ps, GateAlpha)
	for k, i := range idx {
		g := &res.Rows[i]
		switch {
		case g.State == GateRegression:
		case rejected[k]:
			g.State = GateRegression
		case math.Log(g.Lo) >= lt:
			g.State = GatePass
		case math.Log(g.Ratio) < lt:
			g.State = GateSuspected
		default:
			g.State = GateUndecided
		}
	}
	for i := range res.Rows {
		res.Rows[i].Text = res.Rows[i].text(in[i], delta)
	}
	res.Outcome, res.Line = gateLine(in, res.Rows, delta, len(ps))
	return res
}

// gateRow is a row before Holm: its estimate, bounds and p-value, or its
// state when the launches alone settle it.
func gateRow(in GateInput, m Metric, lt float64) GateRow {
	g := GateRow{State: GateUndecided, Lo: math.NaN(), Hi: math.NaN(), P: math.NaN()}
	switch {
	case in.OldSide == SideTainted && !in.NewSide.finished():
		// finished in OLD (its launches tainted) and fails in NEW: it ran
		// before and does not now, whatever OLD's launches measured
		g.State, g.Method = GateRegression, "finished in OLD, fails in NEW"
		return g
	case in.OldSide == SideClean && in.NewSide == SideTainted:
		g.Method = "finished in NEW without a clean launch (every launch tainted or without the metric): rerun it"
		return g
	case in.OldSide == SideClean && !in.NewSide.finished():
		g.State, g.Method = GateRegression, "finished in OLD, fails in NEW"
		return g
	case in.OldSide == SideUnmeasured:
		g.Method = "not measured in OLD (the run stopped before it or was interrupted in it): nothing to judge NEW against"
		return g
	case in.OldSide == SideFailed:
		g.State, g.Method = GateNotJudged, "did not finish in OLD"
		return g
	case in.OldSide == SideTainted || len(in.Old) == 0:
		g.Method = "finished in OLD without a clean launch (every launch tainted or without the metric): nothing to judge NEW against"
		return g
	case len(in.New) == 0:
		g.Method = "no launch values in NEW"
		return g
	}
	sign := 1.0
	if !m.HigherIsBetter {
		sign = -1
	}
	x, y := mstats.Sample{Xs: logs(in.New)}, mstats.Sample{Xs: logs(in.Old)}
	d := sign * (x.Mean() - y.Mean())
	g.Ratio = math.Exp(d)
	hist := historyOf(in.History)
	nx, ny := float64(len(in.New)), float64(len(in.Old))
	var se, df float64
	switch {
	case len(in.New) < 2 || len(in.Old) < 2:
		if hist.runs < MinHistory {
			g.Method = "one launch a side: no interval"
			if hist.runs > 0 {
				g.Method += fmt.Sprintf(" (history: %d earlier runs hold this trial, %d needed)", hist.runs, MinHistory)
			}
			if d < lt {
				g.State = GateSuspected
			}
			return g
		}
		// a prediction interval for one new run's value from the earlier
		// runs' spread (which holds launch noise already)
		d = sign * (x.Mean() - hist.mean)
		g.Ratio = math.Exp(d)
		se, df = hist.sd*math.Sqrt(1+1/float64(hist.runs)), float64(hist.runs-1)
		g.HistoryRuns = hist.runs
		g.Method = fmt.Sprintf("prediction interval from %d earlier runs (NEW against their mean)", hist.runs)
		if se == 0 {
			// Earlier runs that agree to the last digit are copies of one
			// run (or one launch each of a metric without spread), not
			// evidence that runs never differ: the prediction interval
			// would be a point, and one launch a side would pass or fail
			// on it.
			g.Method = fmt.Sprintf("the %d earlier runs hold the same value: no between-run spread to predict from (copies of one run?)", hist.runs)
			if d < lt {
				g.State = GateSuspected
			}
			return g
		}
	default:
		sp2 := ((nx-1)*x.Variance() + (ny-1)*y.Variance()) / (nx + ny - 2)
		launch := sp2 * (1/nx + 1/ny)
		se, df = math.Sqrt(launch), nx+ny-2
		g.Method = "pooled t over launches"
		if nx+ny-2 <= 2 {
			g.Method = fmt.Sprintf("pooled t over launches (%d launches a side: spread from %d degrees of freedom)", min(len(in.New), len(in.Old)), int(nx+ny-2))
		}
		if hist.runs >= MinHistory {
			night := 2 * hist.night(sp2)
			a := launch
			se = math.Sqrt(a + night)
			if night > 0 {
				df = (a + night) * (a + night) / (a*a/(nx+ny-2) + night*night/float64(hist.runs-1))
			}
			g.HistoryRuns = hist.runs
			g.Method = fmt.Sprintf("pooled t over launches, with the between-run variance of %d earlier runs", hist.runs)
		}
	}
	g.DF = df
	if se == 0 { // an exact difference (memory)
		g.Lo, g.Hi, g.P = g.Ratio, g.Ratio, 1
		if d < lt {
			g.P = 0
		}
		return g
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	q := t.Quantile(1 - GateAlpha)
	g.Lo, g.Hi = math.Exp(d-q*se), math.Exp(d+q*se)
	g.P = t.CDF((d - lt) / se) // H0: ratio >= 1/(1+δ); small when NEW is confidently worse
	return g
}

// history is a trial's values in earlier runs, on the log scale.
type history struct {
	runs     int
	mean, sd float64 // of the runs' mean ln values
	within   float64 // pooled within-run variance of ln launch values (NaN: no run has two launches)
	invN     float64 // mean of 1/launches over the runs
}

func historyOf(runs [][]float64) history {
	h := history{within: math.NaN()}
	var means []float64
	var ss, dfw float64
	for _, v := range runs {
		if len(v) == 0 {
			continue
		}
		s := mstats.Sample{Xs: logs(v)}
		means = append(means, s.Mean())
		h.invN += 1 / float64(len(v))
		if len(v) > 1 {
			ss += s.Variance() * float64(len(v)-1)
			dfw += float64(len(v) - 1)
		}
	}
	h.runs = len(means)
	if h.runs < 2 {
		return h
	}
	h.invN /= float64(h.runs)
	ms := mstats.Sample{Xs: means}
	h.mean, h.sd = ms.Mean(), ms.StdDev()
	if dfw > 0 {
		h.within = ss / dfw
	}
	return h
}

// night is the between-run variance of a trial's value that launch noise
// does not explain: the runs' spread less what their launches contribute
// (the history's own within-run variance, or else the present launches'),
// never below 0.
func (h history) night(launchVar float64) float64 {
	w := h.within
	if math.IsNaN(w) {
		w = launchVar
	}
	return math.Max(0, h.sd*h.sd-w*h.invN)
}

// text is a row in words.
func (g GateRow) text(in GateInput, delta float64) string {
	band := PercentText(delta)
	iv := ""
	if !math.IsNaN(g.Lo) {
		iv = fmt.Sprintf(" [%s, %s]", ratioDec(g.Lo, 3), ratioDec(g.Hi, 3))
	}
	r := ratioDec(g.Ratio, 3) + "×" + iv
	switch g.State {
	case GateRegression:
		if !in.NewSide.finished() {
			return "REGRESSION: finished in OLD, fails in NEW"
		}
		return fmt.Sprintf("REGRESSION: %s, slower by more than %s", r, band)
	case GateSuspected:
		if math.IsNaN(g.Lo) {
			return fmt.Sprintf("suspected regression: %s (%s)", r, g.Method)
		}
		return fmt.Sprintf("suspected regression: %s, not confirmed", r)
	case GatePass:
		t := "no regression beyond " + band
		if g.Hi < 1 {
			t += fmt.Sprintf(" (slower by %s–%s%%, within %s)", pct1(1-g.Hi), pct1(1-g.Lo), band)
		}
		return t
	}
	if g.State == GateNotJudged {
		return "not judged: " + g.Method
	}
	if in.OldSide != SideClean || len(in.Old) == 0 || len(in.New) == 0 {
		return "undecided: " + g.Method
	}
	if math.IsNaN(g.Lo) {
		return fmt.Sprintf("undecided: %s (%s)", r, g.Method)
	}
	if strings.Contains(g.Method, "degrees of freedom") || g.HistoryRuns > 0 {
		return fmt.Sprintf("undecided: %s (%s; needs more launches a side)", r, g.Method)
	}
	return fmt.Sprintf("undecided: %s (needs more launches a side)", r)
}

// gateLine is the outcome and its one-line summary. k is how many rows were
// tested (had a p-value): PASS needs at least one, so that a run whose rows
// were all left out (none finished in OLD) says so instead of passing.
func gateLine(in []GateInput, rows []GateRow, delta float64, k int) (string, string) {
	band := PercentText(delta)
	var reg, sus, und, noBase, noNew, unmeasured, slow []string
	var slowLo, slowHi float64
	judged := 0
	for i, g := range rows {
		name := in[i].Name
		switch g.State {
		case GateRegression:
			if !in[i].NewSide.finished() {
				reg = append(reg, name+" fails now")
			} else {
				reg = append(reg, fmt.Sprintf("%s %s×", name, ratioDec(g.Ratio, 3)))
			}
		case GateSuspected:
			sus = append(sus, fmt.Sprintf("%s %s×", name, ratioDec(g.Ratio, 3)))
		case GateUndecided:
			if in[i].OldSide == SideUnmeasured {
				unmeasured = append(unmeasured, name)
			} else if in[i].OldSide != SideClean || len(in[i].Old) == 0 {
				noBase = append(noBase, name)
			} else if in[i].NewSide == SideTainted {
				noNew = append(noNew, name)
			} else {
				und = append(und, name)
			}
		case GatePass:
			if g.Hi < 1 {
				if len(slow) == 0 {
					slowLo, slowHi = 1-g.Hi, 1-g.Lo
				}
				slowLo, slowHi = math.Min(slowLo, 1-g.Hi), math.Max(slowHi, 1-g.Lo)
				slow = append(slow, name)
			}
		}
		if g.State != GateNotJudged {
			judged++
		}
	}
	within := ""
	if len(slow) > 0 {
		within = fmt.Sprintf("; %d %s slower by %s–%s%% (within %s): %s", len(slow), trialsWord(len(slow)), pct1(slowLo), pct1(slowHi), band, strings.Join(slow, ", "))
	}
	switch {
	case len(reg) > 0:
		return GateFailed, fmt.Sprintf("REGRESSION: %d %s slower by more than %s or failing: %s%s", len(reg), trialsWord(len(reg)), band, strings.Join(reg, ", "), within)
	case len(sus)+len(und)+len(noBase)+len(noNew)+len(unmeasured) > 0:
		line := fmt.Sprintf("INCONCLUSIVE: %d of %d %s could not be judged", len(sus)+len(und)+len(noBase)+len(noNew)+len(unmeasured), judged, trialsWord(judged))
		if len(sus) > 0 {
			line += "; suspected regressions: " + strings.Join(sus, ", ")
		}
		if len(und) > 0 {
			line += "; undecided: " + strings.Join(und, ", ")
		}
		if len(noBase) > 0 {
			line += "; no clean launch in OLD: " + strings.Join(noBase, ", ")
		}
		if len(noNew) > 0 {
			line += "; no clean launch in NEW: " + strings.Join(noNew, ", ")
		}
		if len(unmeasured) > 0 {
			line += "; not measured in OLD: " + strings.Join(unmeasured, ", ")
		}
		line += within + "."
		if len(sus)+len(und) > 0 {
			line += fmt.Sprintf(" Rerun with more launches a side (repeats: 3 or more, or repeats: auto), or give --history DIR with %d or more earlier runs.", MinHistory)
		}
		if len(noBase) > 0 {
			line += " Compare against a run whose launches of these trials are clean (rerun OLD's study, or write the baseline again from such a run)."
		}
		if len(noNew) > 0 {
			line += " Rerun NEW where its launches are clean (its records say why each was tainted)."
		}
		if len(unmeasured) > 0 {
			line += " Compare against a complete run (finish OLD's with casestudy run --resume)."
		}
		return GateInconclusive, strings.TrimSuffix(line, ".")
	case k == 0:
		return GateInconclusive, fmt.Sprintf("INCONCLUSIVE: no trial was tested: none of the %d %s in both runs finished in OLD, so nothing shows NEW no slower. "+
			"Compare against a run in which these trials finished", len(rows), trialsWord(len(rows)))
	}
	return GatePassed, fmt.Sprintf("PASS: no trial slower by more than %s (%s one-sided, Holm over %d)%s", band, PercentText(1-GateAlpha), k, within)
}

func trialsWord(n int) string {
	if n == 1 {
		return "trial"
	}
	return "trials"
}

type gateRowJSON struct {
	State       GateState `json:"state"`
	Ratio       *float64  `json:"ratio"`
	Lo          *float64  `json:"lo"`
	Hi          *float64  `json:"hi"`
	P           *float64  `json:"p"`
	DF          float64   `json:"df"`
	Method      string    `json:"method"`
	HistoryRuns int       `json:"history_runs"`
	Text        string    `json:"text"`
}

// MarshalJSON writes missing numbers as null.
func (g GateRow) MarshalJSON() ([]byte, error) {
	r := bound(g.Ratio)
	if g.Ratio == 0 {
		r = nil
	}
	return json.Marshal(gateRowJSON{State: g.State, Ratio: r, Lo: bound(g.Lo), Hi: bound(g.Hi), P: bound(g.P),
		DF: finite(g.DF), Method: g.Method, HistoryRuns: g.HistoryRuns, Text: g.Text})
}

// UnmarshalJSON reads nulls back as NaN.
func (g *GateRow) UnmarshalJSON(b []byte) error {
	var j gateRowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*g = GateRow{State: j.State, Lo: math.NaN(), Hi: math.NaN(), P: math.NaN(), DF: j.DF, Method: j.Method,
		HistoryRuns: j.HistoryRuns, Text: j.Text}
	for _, f := range []struct {
		from *float64
		to   *float64
	}{{j.Ratio, &g.Ratio}, {j.Lo, &g.Lo}, {j.Hi, &g.Hi}, {j.P, &g.P}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return nil
}
