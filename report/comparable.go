package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/stats"
)

// SummaryError is a summary or baseline file that cannot be trusted: which
// field, what is wrong with it and what to do. Its exit status is 2 (bad
// input), wherever it surfaces.
type SummaryError struct {
	Path  string
	Field string // "metric.name", "trials[2].launches.values[0]"
	Msg   string
}

func (e *SummaryError) Error() string { return e.Path + ": " + e.Field + " " + e.Msg }

// ExitCode makes internal/exitcode.Of report bad input (2).
func (e *SummaryError) ExitCode() int { return exitcode.Input }

// rewriteHint is what to do about a summary or baseline file that fails a check.
const rewriteHint = "write the file again from its run (casestudy baseline RUN_DIR -o FILE, or casestudy report RUN_DIR for summary.json) instead of editing it"

// checkSummary checks what compare trusts in a summary or baseline file read
// from path, and sets s.Metric from stats.Metrics: the objective's direction
// (higher or lower is better) comes from casestudy, never from the file alone,
// so a file that drops or edits its metric cannot turn a slowdown into a
// speedup. It refuses (SummaryError) an unknown or empty metric, a direction,
// unit or goal that contradicts it, empty comparable facts, empty or
// duplicate trial IDs (compare matches trials by ID) and launch values that
// are not finite and positive (every comparison is on their logs). Scale
// facts the file's comparable section lacks are taken from its
// provenance.workload when that holds them (fillScale).
func checkSummary(path string, s *Summary) error {
	bad := func(field, format string, args ...any) error {
		return &SummaryError{Path: path, Field: field, Msg: fmt.Sprintf(format, args...) + ": " + rewriteHint}
	}
	name := strings.TrimSpace(s.Metric.Name)
	m, ok := stats.Metrics[name]
	switch {
	case name == "":
		return bad("metric.name", "is missing or empty: the file must name its objective (%s)", metricNames())
	case !ok:
		return bad("metric.name", "is %q, not an objective casestudy measures (%s)", s.Metric.Name, metricNames())
	case s.Metric.HigherIsBetter != m.HigherIsBetter:
		return bad("metric.higher_is_better", "is %t, but %s is better %s", s.Metric.HigherIsBetter, m.Name, betterWord(m))
	case s.Metric.Unit != "" && s.Metric.Unit != m.Unit:
		return bad("metric.unit", "is %q, but %s is measured in %s", s.Metric.Unit, m.Name, m.Unit)
	}
	if o := strings.ToLower(strings.TrimSpace(s.Objective.Metric)); o != "" {
		if om, known := stats.Metrics[o]; known && om.Name != m.Name {
			return bad("objective.metric", "is %q, but metric.name is %q", s.Objective.Metric, s.Metric.Name)
		}
	}
	switch g := s.Objective.Goal; {
	case g == "":
	case g != "max" && g != "min":
		return bad("objective.goal", "is %q, not max or min", g)
	case (g == "max") != m.HigherIsBetter:
		return bad("objective.goal", "is %s, but %s is better %s", g, m.Name, betterWord(m))
	}
	s.Metric = m
	// compare defaults to the recorded threshold: one at 100% or more would
	// pass a 2x slowdown (compare --threshold and a study's refuse it too)
	if t := s.CompareThreshold; !(t >= 0 && t < 1) {
		return bad("compare_threshold", "is %v: a threshold is a fraction above 0 and below 1 (0.05 = 5%%; 0 or absent: none recorded)", t)
	}

	c := &s.Comparable
	for _, f := range []struct{ field, v string }{
		{"comparable.model", c.Model}, {"comparable.workload", c.Workload}, {"comparable.metric", c.Metric},
	} {
		if strings.TrimSpace(f.v) == "" {
			return bad(f.field, "is missing or empty: compare cannot tell whether the runs measured the same thing")
		}
	}
	if cm, known := stats.Metrics[strings.TrimSpace(c.Metric)]; !known || cm.Name != m.Name {
		return bad("comparable.metric", "is %q, but metric.name is %q", c.Metric, s.Metric.Name)
	}
	c.Metric = m.Name
	fillScale(c, s.Provenance.Workload)
	for _, f := range []struct {
		field string
		v     *int
	}{{"comparable.gpus", c.GPUs}, {"comparable.nodes", c.Nodes}, {"comparable.ranks", c.Ranks}, {"comparable.threads", c.Threads}} {
		if f.v != nil && *f.v < 0 {
			return bad(f.field, "is %d: a count cannot be negative", *f.v)
		}
	}

	first := map[string]int{}
	for i := range s.Trials {
		t := &s.Trials[i]
		if strings.TrimSpace(t.ID) == "" {
			return bad(fmt.Sprintf("trials[%d].id", i), "is missing or empty: compare matches trials by ID")
		}
		if j, dup := first[t.ID]; dup {
			return bad(fmt.Sprintf("trials[%d].id", i), "is %s, the ID of trials[%d] too: each trial appears once (compare matches trials by ID)", t.ID, j)
		}
		first[t.ID] = i
		for _, a := range []struct {
			field string
			n     int
		}{{"samples_per_s", len(t.Launches.SamplesPerS)}, {"repeats", len(t.Launches.Repeats)}} {
			if a.n != 0 && a.n != len(t.Launches.Values) {
				return bad(fmt.Sprintf("trials[%d].launches.%s", i, a.field), "of trial %s has %d entries where launches.values has %d: one each per clean launch",
					t.ID, a.n, len(t.Launches.Values))
			}
		}
		for k, v := range t.Launches.Values {
			if !(v > 0) || math.IsInf(v, 0) {
				return bad(fmt.Sprintf("trials[%d].launches.values[%d]", i, k), "of trial %s is %v: a launch's %s must be finite and positive",
					t.ID, v, m.Name)
			}
		}
	}
	return nil
}

// metricNames lists the objective names casestudy measures.
func metricNames() string {
	var names []string
	for _, m := range stats.Metrics {
		if !slices.Contains(names, m.Name) {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func betterWord(m stats.Metric) string {
	if m.HigherIsBetter {
		return "higher (goal max)"
	}
	return "lower (goal min)"
}

// fillScale sets the scale facts of c that are not recorded (nil) from a
// manifest's workload (or a summary's provenance.workload, the same map):
// gpus, nodes, ranks and threads when the map holds them, world_of_one
// whenever it holds anything (a manifest records it only when true). A fact
// neither holds stays nil: unknown.
func fillScale(c *Comparable, workload map[string]any) {
	count := func(p **int, key string) {
		if *p != nil {
			return
		}
		if v, ok := workload[key]; ok && v != nil {
			n := int(stats.Number(v))
			*p = &n
		}
	}
	count(&c.GPUs, "gpus")
	count(&c.Nodes, "nodes")
	count(&c.Ranks, "ranks")
	count(&c.Threads, "threads")
	if c.WorldOfOne == nil && len(workload) > 0 {
		w, _ := workload["world_of_one"].(bool)
		c.WorldOfOne = &w
	}
}

// scaleFacts are the scale facts of a Comparable by their workload names.
func scaleFacts(c Comparable) []struct{ name, v string } {
	num := func(p *int) string {
		if p == nil {
			return ""
		}
		return strconv.Itoa(*p)
	}
	woo := ""
	if c.WorldOfOne != nil {
		woo = strconv.FormatBool(*c.WorldOfOne)
	}
	return []struct{ name, v string }{
		{"workload.gpus", num(c.GPUs)}, {"workload.nodes", num(c.Nodes)}, {"workload.ranks", num(c.Ranks)},
		{"workload.threads", num(c.Threads)}, {"workload.world_of_one", woo},
	}
}

// scaleDiffers are the reasons old and new cannot be compared for their
// scale: the GPU, node, rank or thread count or world_of_one, where both
// record it and the values differ. These are not knobs, so the trial IDs
// match across them (an 8-GPU run and a 1-GPU copy of its study share every
// ID). A fact one side does not record is scaleUnknown's.
func scaleDiffers(old, new Comparable) []string {
	var why []string
	o, n := scaleFacts(old), scaleFacts(new)
	for i := range o {
		if o[i].v != "" && n[i].v != "" && o[i].v != n[i].v {
			why = append(why, fmt.Sprintf("%s differs (OLD %s, NEW %s)", o[i].name, o[i].v, n[i].v))
		}
	}
	return why
}

// scaleUnknown are warnings for the scale facts one of old and new records
// and the other does not (a file written before casestudy recorded them):
// compared, not refused, so that older baselines stay usable. Facts neither
// records say nothing.
func scaleUnknown(old, new Comparable) []string {
	var out []string
	o, n := scaleFacts(old), scaleFacts(new)
	for i := range o {
		switch {
		case o[i].v == "" && n[i].v != "":
			out = append(out, fmt.Sprintf("OLD does not record %s (NEW: %s): check that both runs used the same; write OLD's baseline again to record it", o[i].name, n[i].v))
		case o[i].v != "" && n[i].v == "":
			out = append(out, fmt.Sprintf("NEW does not record %s (OLD: %s): check that both runs used the same", n[i].name, o[i].v))
		}
	}
	return out
}
