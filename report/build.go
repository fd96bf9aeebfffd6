package report

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/units"
	knobreg "github.com/casestudy/casestudy/knobs" // the tests have a helper named knobs
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// NotRun is the outcome of a planned trial that has no record (the run was
// stopped before it; `casestudy run --resume` finishes it).
const NotRun store.Outcome = "not_run"

// Build computes the summary of a run: statistics per trial, the headline,
// provenance. findings are the checklist's results (nil when not evaluated).
func Build(run *store.Run, findings []checklist.Result) *Summary {
	m := &run.Manifest
	s := &Summary{
		Schema:    SchemaVersion,
		Kind:      KindSummary,
		Study:     m.Study,
		RunID:     m.RunID,
		Created:   m.Created.UTC(),
		Objective: m.Objective,
		Counts:    map[string]int{},
		Dropped:   m.Dropped,
		Findings:  findings,
	}
	if s.Findings == nil {
		s.Findings = []checklist.Result{}
	}
	if m.CompareThreshold > 0 {
		s.CompareThreshold = m.CompareThreshold
	}
	s.Provenance = provenance(run)

	byID := map[string]*store.TrialRecord{}
	for i := range run.Trials { // a resumed run may hold a trial twice: the last record wins
		byID[run.Trials[i].ID] = &run.Trials[i]
	}
	for _, p := range m.Plan {
		if _, ok := byID[p.ID]; !ok {
			s.Trials = append(s.Trials, Trial{ID: p.ID, Index: p.Index, Knobs: p.Knobs, Changed: p.Changed,
				Outcome: NotRun, Error: "no record in trials.jsonl: the run stopped before this trial (finish it with casestudy run --resume)"})
		}
	}
	for _, rec := range byID {
		s.Trials = append(s.Trials, buildTrial(rec))
	}
	sort.Slice(s.Trials, func(i, j int) bool {
		if s.Trials[i].Index != s.Trials[j].Index {
			return s.Trials[i].Index < s.Trials[j].Index
		}
		return s.Trials[i].ID < s.Trials[j].ID
	})
	for i := range s.Trials {
		sanitize(&s.Trials[i])
		s.Counts[string(s.Trials[i].Outcome)]++
	}
	s.SweptKnobs = orderKnobs(sweptKnobs(s.Trials), studySweepOrder(m.StudyText))
	s.Headline = headline(s)
	s.Timeline = TimelineOf(run)
	s.NCCL = ncclEvidence(run)
	return s
}

func buildTrial(rec *store.TrialRecord) Trial {
	t := Trial{ID: rec.ID, Index: rec.Index, Knobs: rec.Knobs, Changed: rec.Changed, Outcome: rec.Outcome,
		Error: rec.Error, Command: rec.Command, Attempts: rec.Attempts, Throttled: rec.Throttled}
	if t.Changed == nil {
		t.Changed = []string{}
	}
	t.Baseline = len(rec.Changed) == 0
	if rec.Outcome != store.OK {
		t.Samples = stats.Samples{Source: stats.NoSamples}
		return t
	}
	t.Samples = stats.TrialSamples(rec)
	if len(t.Samples.Throughput) == 0 {
		t.Warnings = append(t.Warnings, "recorded ok but no repeat has measured steps: nothing to summarise")
		if t.Error == "" {
			t.Error = "no measured steps recorded"
		}
		return t
	}
	t.Throughput = stats.Summarize(t.Samples.Throughput)
	t.Warnings = append(t.Warnings, t.Throughput.Warnings...)
	t.CV = stats.DescribeOf(t.Samples.Throughput).CV
	sum := rec.Summary
	if sum == nil {
		sum = stats.SummarizeTrial(rec.Repeats, stats.SummaryOptions{})
	}
	if sum == nil {
		t.Warnings = append(t.Warnings, "no measured steps recorded")
		return t
	}
	t.TokensPerS = sum.TokensPerS
	t.StepMS = StepTime{Median: sum.StepMSMedian, P10: sum.StepMSP10, P90: sum.StepMSP90}
	t.StepCV, t.RepeatCV = sum.StepCV, sum.RepeatCV
	t.Noisy = sum.Noisy || t.CV > NoisyCV
	t.MFU, t.TFLOPS, t.MemPeakBytes, t.FinalLoss = sum.MFU, sum.TFLOPS, sum.MemPeakBytes, sum.FinalLoss
	b := &Breakdown{ForwardMS: sum.ForwardMS, BackwardMS: sum.BackwardMS, OptimizerMS: sum.OptimizerMS,
		ExposedCommMS: sum.ExposedCommMS, BubbleMS: sum.BubbleMS}
	named := b.ForwardMS + b.BackwardMS + b.OptimizerMS + b.ExposedCommMS + b.BubbleMS
	b.OtherMS = max(0, sum.StepMSMedian-named)
	t.Breakdown = b
	if t.Throttled {
		t.Warnings = append(t.Warnings, "a GPU was slowed thermally or by hardware (slowdown, power brake) for over 1% of a measured window: that launch is tainted")
	}
	return t
}

// sweptKnobs are the knobs that take more than one value across the trials,
// in order of first appearance in the trials' changed lists.
func sweptKnobs(trials []Trial) []string {
	values := map[string]map[string]bool{}
	for _, t := range trials {
		for k, v := range t.Knobs {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range trials {
		for _, k := range t.Changed {
			if !seen[k] && len(values[k]) > 1 {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(values)) { // swept without a changed list
		if !seen[k] && len(values[k]) > 1 {
			out = append(out, k)
		}
	}
	return out
}

// studySweepOrder is the order of the knobs under sweep.knobs in the study
// text, nil when the text has none (for example, a sweep inherited through
// extends) or does not parse.
func studySweepOrder(text string) []string {
	var doc yaml.Node
	if text == "" || yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	sweep := mapValue(doc.Content[0], "sweep")
	knobs := mapValue(sweep, "knobs")
	if knobs == nil || knobs.Kind != yaml.MappingNode {
		return nil
	}
	var out []string
	for i := 0; i+1 < len(knobs.Content); i += 2 {
		out = append(out, knobs.Content[i].Value)
	}
	return out
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// orderKnobs puts the knobs named in order first, in that order, then the rest.
func orderKnobs(knobs, order []string) []string {
	rank := map[string]int{}
	for i, k := range order {
		rank[k] = i + 1
	}
	out := slices.Clone(knobs)
	slices.SortStableFunc(out, func(a, b string) int {
		ra, rb := rank[a], rank[b]
		switch {
		case ra > 0 && rb > 0:
			return ra - rb
		case ra > 0:
			return -1
		case rb > 0:
			return 1
		}
		return 0
	})
	return out
}

// objective maps the study's objective metric to what the best is chosen by.
func objective(o store.Objective) (metric string, higherIsBetter bool, warn string) {
	switch strings.ToLower(o.Metric) {
	case "", "throughput", "samples_per_s", "tokens_per_s":
		return "throughput", true, ""
	case "step_time", "step_ms":
		return "step_time", false, ""
	case "mfu", "tflops":
		return "mfu", true, ""
	}
	return "throughput", true, fmt.Sprintf("objective metric %q is not one the report ranks by; ranked by throughput", o.Metric)
}

func headline(s *Summary) Headline {
	metric, higher, warn := objective(s.Objective)
	if warn != "" {
		s.Warnings = append(s.Warnings, warn)
	}
	h := Headline{Metric: metric, Unit: "samples/s"}
	var best, base *Trial
	for i := range s.Trials {
		t := &s.Trials[i]
		if !t.OK() {
			continue
		}
		if t.Baseline && base == nil {
			base = t
		}
		if best == nil || better(t, best, metric) {
			best = t
		}
	}
	if best == nil {
		h.Status = HeadlineNoTrials
		h.Text = fmt.Sprintf("No trial finished: %s.", CountsText(s.Counts))
		return h
	}
	best.Best = true
	h.Best = best.ID
	bv := best.Throughput
	h.BestValue = &bv
	h.BestKnobs = map[string]string{}
	for _, k := range best.Changed {
		h.BestKnobs[k] = best.Knobs[k]
	}
	if base == nil {
		h.Status = HeadlineNoBaseline
		h.Text = fmt.Sprintf("Best trial %s: %s samples/s (%s). The baseline trial did not finish, so there is no speedup to report.",
			best.ID, Num(bv.Center), knobList(h.BestKnobs))
		return h
	}
	h.Baseline = base.ID
	av := base.Throughput
	h.BaseValue = &av
	h.Status = HeadlineSpeedup
	if best == base {
		h.BestIsBase = true
		h.Text = fmt.Sprintf("The baseline is the best trial: %s samples/s; no swept setting beat it.", Num(bv.Center))
		return h
	}
	var sp stats.Speedup
	if metric == "step_time" {
		sp = stats.NewSpeedup(best.Samples.StepMS, base.Samples.StepMS, false)
	} else {
		sp = stats.NewSpeedup(best.Samples.Throughput, base.Samples.Throughput, higher)
	}
	h.Speedup = &sp
	h.Text = fmt.Sprintf("Best trial %s runs %s the baseline's %s (%s), %s, with %s.",
		best.ID, Ratio(sp.Ratio), metricName(metric), RatioCI(sp), SignificanceText(sp.P, sp.Significant), knobList(h.BestKnobs))
	return h
}

func better(a, b *Trial, metric string) bool {
	switch metric {
	case "step_time":
		return a.StepMS.Median > 0 && (b.StepMS.Median == 0 || a.StepMS.Median < b.StepMS.Median)
	case "mfu":
		if a.MFU != b.MFU {
			return a.MFU > b.MFU
		}
	}
	return a.Throughput.Center > b.Throughput.Center
}

func metricName(metric string) string {
	switch metric {
	case "step_time":
		return "step time"
	case "mfu":
		return "throughput (best chosen by MFU)"
	}
	return "throughput"
}

// CountsText is trial counts by outcome as "1 oom, 2 ok" (sorted by outcome name).
func CountsText(c map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%d %s", c[k], k))
	}
	if len(parts) == 0 {
		return "no trials recorded"
	}
	return strings.Join(parts, ", ")
}

func knobList(k map[string]string) string {
	if len(k) == 0 {
		return "baseline settings"
	}
	return knobreg.Join(k, nil, ", ")
}

func provenance(run *store.Run) Provenance {
	m := &run.Manifest
	p := Provenance{
		RunDir: run.Dir, Command: m.Command, StudyPath: m.StudyPath, StudySHA256: m.StudySHA256,
		Casestudy: strings.TrimSpace(m.Tool.Version + " (" + m.Tool.Commit + ")"),
		Host:      m.Host.Hostname, CPU: fmt.Sprintf("%s × %d", m.Host.CPU, m.Host.CPUs),
		Driver: m.Host.Driver, CUDADriver: m.Host.CUDADriver, Topology: m.Host.TopoMatrix,
		Nodes: 1 + len(m.Host.Nodes), Model: m.Model, Workload: m.Workload, Env: m.Env,
	}
	for _, g := range m.Host.GPUs {
		p.GPUs = append(p.GPUs, fmt.Sprintf("%d: %s (%s)", g.Index, g.Name, units.Bytes(int64(g.MemBytes))))
	}
	if e := m.Engine; e != nil {
		p.Torch, p.CUDA, p.NCCL, p.CuDNN = e.Torch, e.CUDA, e.NCCL, e.CuDNN
	}
	return p
}
