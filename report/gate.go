package report

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// gateSide is what a run did with trial t, for the gate.
func gateSide(t *Trial) stats.GateSide {
	switch {
	case t.OK():
		return stats.SideClean
	case t.Outcome == store.OK:
		return stats.SideTainted
	case t.Unmeasured():
		return stats.SideUnmeasured
	}
	return stats.SideFailed
}

// gate judges the rows with the regression gate (stats.Gate): pairs are the
// rows' OLD and NEW trials, history the earlier comparable runs, missing the
// trials that finished in OLD and are not in NEW (by name). A missing trial
// makes a passing gate inconclusive: a NEW whose study or summary file holds
// one trial of OLD's seven would otherwise pass on that one. (A run that
// stopped early records the rest as not_run: those rows fail already.)
// Trials that did not finish in OLD have nothing to regress from and are
// only listed (OnlyOld), as their rows are not judged.
func (c *Comparison) gate(pairs [][2]*Trial, history []*Summary, missing []string) {
	in := make([]stats.GateInput, len(pairs))
	for i, p := range pairs {
		ot, nt := p[0], p[1]
		in[i] = stats.GateInput{Name: gateName(c.Rows[i]), OldSide: gateSide(ot), NewSide: gateSide(nt),
			Old: ot.Launches.Values, New: nt.Launches.Values}
		for _, h := range history {
			if ht := h.trial(nt.ID); ht != nil && ht.OK() && len(ht.Launches.Values) > 0 {
				in[i].History = append(in[i].History, ht.Launches.Values)
			}
		}
	}
	res := stats.Gate(in, c.Metric, c.Threshold)
	for i := range c.Rows {
		r := &c.Rows[i]
		g := res.Rows[i]
		r.Gate = &g
		if (g.State != stats.GatePass || g.Hi < 1) && g.State != stats.GateNotJudged { // the row's judgement in words, unless plain
			text := g.Text // without the state the status column shows
			if head, rest, ok := strings.Cut(text, ": "); ok && strings.EqualFold(head, string(g.State)) {
				text = rest
			}
			r.Note = strings.TrimSuffix(text+"; "+r.Note, "; ")
		}
		switch g.State {
		case stats.GateRegression:
			r.Regression = true
			c.Regressions = append(c.Regressions, r.ID)
		case stats.GateSuspected:
			c.Suspected = append(c.Suspected, r.ID)
		case stats.GateUndecided:
			c.Undecided = append(c.Undecided, r.ID)
		}
	}
	c.Gate, c.Verdict = res.Outcome, res.Line
	if c.Old.RunID != "" && c.Old.RunID == c.New.RunID && c.Gate == stats.GatePassed {
		// OLD and NEW are one run (a run against itself, or against a
		// baseline written from it): nothing was measured twice, so nothing
		// can show a regression.
		c.Gate = stats.GateInconclusive
		c.Verdict = fmt.Sprintf("INCONCLUSIVE: OLD and NEW are the same run (%s): nothing measured twice can show a regression. "+
			"Compare a later run against it, or pass --inconclusive=pass to accept it", c.New.RunID)
		return
	}
	if len(missing) == 0 {
		return
	}
	what := fmt.Sprintf("%d %s that finished in OLD %s not in NEW: %s",
		len(missing), plural(len(missing), "trial", "trials"), plural(len(missing), "is", "are"), strings.Join(missing, ", "))
	if c.Gate != stats.GatePassed {
		c.Verdict += ". Also " + what
		return
	}
	c.Gate = stats.GateInconclusive
	c.Verdict = fmt.Sprintf("INCONCLUSIVE: %s; the %d in both runs: %s. Run NEW with every trial of OLD, "+
		"or pass --inconclusive=pass to accept a NEW that holds only some of them", what, len(pairs), strings.TrimPrefix(res.Line, "PASS: "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// gateName names a trial by its knobs, then its ID: "micro_batch=32 (1537e079)".
func gateName(r CompareRow) string {
	if r.Knobs == "" {
		return r.ID
	}
	return r.Knobs + " (" + r.ID + ")"
}

// trial is the trial with this ID, nil when the summary has none.
func (s *Summary) trial(id string) *Trial {
	for i := range s.Trials {
		if s.Trials[i].ID == id {
			return &s.Trials[i]
		}
	}
	return nil
}

// LoadGateHistory reads the earlier runs in dir (run directories, or summary and
// baseline JSON files) that are comparable with new, leaving out new itself
// (by run ID; OLD's run stays, an earlier run like any other, once), every
// copy of a run after the first (a run directory
// and its baseline file, or a file copied twice: one run counted n times
// would shrink the between-run spread towards 0 and decide a row on it) and
// anything that is not a run. It says in notes what it left out and why. A
// trial is judged on its history only when at least stats.MinHistory of
// these runs hold it.
func LoadGateHistory(dir string, new *Summary) (runs []*Summary, notes []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--history %s: %w (give a directory of earlier run directories or baseline files)", dir, err)
	}
	skipped := map[string][]string{}
	seen := runIDs{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !e.IsDir() && !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "manifest.json")); err != nil {
				continue // not a run directory
			}
		}
		s, err := LoadSide(path)
		if err != nil {
			skipped["unreadable"] = append(skipped["unreadable"], e.Name())
			continue
		}
		switch {
		case s.RunID != "" && s.RunID == new.RunID:
			continue // NEW itself
		case comparable(s, new) != nil:
			skipped["not comparable with NEW"] = append(skipped["not comparable with NEW"], e.Name())
			continue
		}
		if first, dup := seen.again(s.RunID, e.Name()); dup {
			why := "a run read already, by run ID"
			skipped[why] = append(skipped[why], e.Name()+" (= "+first+")")
			continue
		}
		runs = append(runs, s)
	}
	reasons := make([]string, 0, len(skipped))
	for why := range skipped {
		reasons = append(reasons, why)
	}
	sort.Strings(reasons)
	for _, why := range reasons {
		notes = append(notes, fmt.Sprintf("history: left out %d entries (%s): %s", len(skipped[why]), why, strings.Join(skipped[why], ", ")))
	}
	if len(runs) < stats.MinHistory {
		notes = append(notes, fmt.Sprintf("history: %s holds %d comparable earlier runs; a trial needs %d to be judged on its history",
			dir, len(runs), stats.MinHistory))
	}
	return runs, notes, nil
}
