package report

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/ansi"
	"github.com/casestudy/casestudy/internal/units"
	knobreg "github.com/casestudy/casestudy/knobs" // the tests have a helper named knobs
	meas "github.com/casestudy/casestudy/measure"
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
	if m.IsRehearsal() { // checks, not measurements: no values, no verdicts
		return buildRehearsal(run)
	}
	s := &Summary{
		Schema:    SchemaVersion,
		Kind:      KindSummary,
		Study:     m.Study,
		RunID:     m.RunID,
		Created:   m.Created.UTC(),
		Objective: m.Objective,
		Design:    meas.DesignOf(m),
		Counts:    map[string]int{},
		Findings:  findings,
	}
	if s.Findings == nil {
		s.Findings = []checklist.Result{}
	}
	metric, warn := meas.MetricFor(m.Objective)
	s.Metric = metric
	if warn != "" {
		s.Warnings = append(s.Warnings, warn)
	}
	if m.CompareThreshold > 0 {
		s.CompareThreshold = m.CompareThreshold
	}
	level := s.Design.Level(s.Threshold())
	s.Confidence = level.Confidence
	s.Provenance = provenance(run)
	s.Comparable = comparableOf(m, metric)

	byID := map[string]*store.TrialRecord{}
	for i := range run.Trials { // a resumed run may hold a trial twice: the last record wins
		byID[run.Trials[i].ID] = &run.Trials[i]
	}
	s.Dropped = droppedCombinations(m, byID)
	for _, p := range run.Unrecorded() {
		s.Trials = append(s.Trials, Trial{ID: p.ID, Index: p.Index, Knobs: p.Knobs, Changed: p.Changed,
			Outcome: NotRun, Error: "no record in trials.jsonl: the run stopped before this trial (finish it with casestudy run --resume)"})
	}
	for _, rec := range byID {
		s.Trials = append(s.Trials, buildTrial(rec, metric, level.Confidence))
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
		s.noteLaunches(byID[s.Trials[i].ID])
	}
	compareWithBaseline(s, level)
	s.SweptKnobs = orderKnobs(sweptKnobs(s.Trials), studySweepOrder(m.StudyText))
	s.Strategy = sweepStrategy(m.StudyText, s.Trials)
	s.sweepValues = studySweepValues(m.StudyText)
	s.MFUPeak = mfuPeak(run)
	setMFU(s)
	setLabels(s)
	s.Profiles = buildProfiles(byID, s.Trials)
	splitGraphBreakdowns(s)
	s.Headline = headline(s, byID)
	s.Measured = measuredOf(m, s, run)
	s.studyText = m.StudyText
	s.Measured.Confirm = confirmOf(s, s.Measured, m.StudyText, m.StudyPath, run.Dir)
	s.Timeline = TimelineOf(run)
	s.ValueBasis = basisOf(run.Trials)
	s.NCCL = ncclEvidence(run)
	return s
}

// Threshold is δ: the study's compare.threshold, else DefaultThreshold.
func (s *Summary) Threshold() float64 {
	if s.CompareThreshold > 0 {
		return s.CompareThreshold
	}
	return DefaultThreshold
}

// noteLaunches lists a trial's launches left out of the statistics and its
// unsteady ones.
func (s *Summary) noteLaunches(rec *store.TrialRecord) {
	if rec == nil {
		return
	}
	for i := range rec.Repeats {
		r := &rec.Repeats[i]
		if r.Outcome != store.OK {
			continue
		}
		if r.Tainted != "" {
			s.Excluded = append(s.Excluded, LaunchNote{Trial: rec.ID, Repeat: r.Repeat, Reason: r.Tainted})
		}
		if d, bad := meas.Unsteady(r); bad {
			s.Unsteady = append(s.Unsteady, LaunchNote{Trial: rec.ID, Repeat: r.Repeat,
				Reason: fmt.Sprintf("not steady: the last third of its steps ran %+.1f%% against the first third", 100*d)})
		}
	}
}

func buildTrial(rec *store.TrialRecord, metric stats.Metric, confidence float64) Trial {
	t := Trial{ID: rec.ID, Index: rec.Index, Knobs: rec.Knobs, Changed: rec.Changed, Outcome: rec.Outcome,
		Error: rec.Error, Command: rec.Command, Attempts: rec.Attempts, Throttled: rec.Throttled}
	if t.Changed == nil {
		t.Changed = []string{}
	}
	t.Baseline = len(rec.Changed) == 0
	t.Launches = meas.TrialLaunches(rec, metric)
	for _, e := range t.Launches.Excluded {
		t.Warnings = append(t.Warnings, fmt.Sprintf("launch %d left out: %s", e.Repeat, e.Reason))
	}
	if rec.Outcome != store.OK {
		return t
	}
	t.Memory = memoryOf(rec)
	t.Layout = layoutOf(rec)
	if t.Launches.N() == 0 {
		t.Warnings = append(t.Warnings, "recorded ok but no clean launch measured "+metric.Name+": nothing to summarise")
		if t.Error == "" {
			t.Error = "no clean launch with a measurement"
		}
		return t
	}
	t.Value = stats.ValueOf(t.Launches.Values, confidence)
	t.Power = powerOf(rec)
	t.Throughput = stats.ValueOf(t.Launches.SamplesPerS, confidence)
	t.Median = stats.MedianCI(t.Launches.Values)
	if t.Value.N >= 2 {
		cv := t.Value.CV
		t.CV = &cv
	}
	if t.Value.N == 1 {
		t.Warnings = append(t.Warnings, "one launch: estimate only, no interval and no p-value (run repeats: 3 or more, or repeats: auto)")
	}
	if rec.Stopped == stats.StopBudget {
		t.Warnings = append(t.Warnings, "stopped by the time budget (workload.max_time) before all its launches ran")
	}
	if tok := meas.TrialLaunches(rec, stats.Metrics["tokens_per_s"]); tok.N() > 0 {
		t.TokensPerS = stats.ValueOf(tok.Values, confidence).Center
	}
	sum := rec.Summary
	if sum == nil {
		sum = meas.SummarizeTrial(rec.Repeats, meas.SummaryOptions{})
	}
	if sum == nil {
		t.Warnings = append(t.Warnings, "no measured steps recorded")
		return t
	}
	t.StepMS = StepTime{Median: sum.StepMSMedian, P10: sum.StepMSP10, P90: sum.StepMSP90}
	t.StepCV, t.RepeatCV = sum.StepCV, sum.RepeatCV
	// the launch is the replicate: noisy is about launches only (one launch has no spread)
	t.Noisy = t.Value.N >= 2 && (t.Value.CV > NoisyCV || sum.RepeatCV > NoisyCV)
	t.MFU, t.TFLOPS, t.MemPeakBytes, t.FinalLoss = sum.MFU, sum.TFLOPS, sum.MemPeakBytes, sum.FinalLoss
	t.OptimStateBytes = sum.OptimStateBytes
	t.LaunchDetail = launchDetails(rec, metric)
	b := &Breakdown{ForwardMS: sum.ForwardMS, BackwardMS: sum.BackwardMS, OptimizerMS: sum.OptimizerMS,
		ExposedCommMS: sum.ExposedCommMS, BubbleMS: sum.BubbleMS, TPCommMS: sum.TPCommMS}
	named := b.ForwardMS + b.BackwardMS + b.OptimizerMS + b.ExposedCommMS + b.BubbleMS
	b.OtherMS = max(0, sum.StepMSMedian-named)
	t.Breakdown = b
	if t.Throttled {
		t.Warnings = append(t.Warnings, "a GPU was slowed thermally or by hardware (slowdown, power brake) for over 1% of a measured window: that launch is tainted")
	}
	return t
}

// baselineTrial is the baseline (no knob changed) if it finished, else nil.
func baselineTrial(s *Summary) *Trial {
	for i := range s.Trials {
		if t := &s.Trials[i]; t.Baseline && t.OK() {
			return t
		}
	}
	return nil
}

// compareWithBaseline sets every finished trial's comparison with the baseline.
func compareWithBaseline(s *Summary, level stats.Level) {
	base := baselineTrial(s)
	if base == nil {
		return
	}
	for i := range s.Trials {
		t := &s.Trials[i]
		if t == base || !t.OK() {
			continue
		}
		c := stats.Compare(t.Launches.Values, base.Launches.Values, s.Metric, level)
		t.VsBaseline = &c
	}
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

func headline(s *Summary, recs map[string]*store.TrialRecord) Headline {
	h := Headline{Metric: s.Metric.Name, Unit: s.Metric.Unit}
	var ordered []*store.TrialRecord
	for i := range s.Trials {
		if s.Trials[i].OK() {
			ordered = append(ordered, recs[s.Trials[i].ID])
		} else {
			ordered = append(ordered, nil)
		}
	}
	bi := meas.Best(withIntervals(s, ordered), s.Metric)
	if bi < 0 {
		h.Status = HeadlineNoTrials
		h.Text = fmt.Sprintf("No trial finished: %s.", CountsText(s.Counts))
		if n := s.Counts[string(store.OK)]; n > 0 {
			h.Text = fmt.Sprintf("No trial has a value of %s: %d trial(s) ran to the end without one (%s).",
				s.Metric.Name, n, noValueWhy(s))
		}
		return h
	}
	best := &s.Trials[bi]
	mark := func(t *Trial) { // the headline's trial: the ★ best of the tables and summary.json
		t.Best = true
		h.Best = t.ID
		bv := t.Value
		h.BestValue = &bv
		h.BestKnobs = map[string]string{}
		for _, k := range t.Changed {
			h.BestKnobs[k] = t.Knobs[k]
		}
	}
	base := baselineTrial(s)
	if base == nil {
		mark(best)
		h.Status = HeadlineNoBaseline
		h.Text = fmt.Sprintf("Best trial %s: %s %s (%s). The baseline trial did not finish, so there is nothing to compare it with.",
			best.ID, Num(best.Value.Center), s.Metric.Unit, knobList(h.BestKnobs))
		return h
	}
	h.Baseline = base.ID
	av := base.Value
	h.BaseValue = &av
	h.Status = HeadlineSpeedup
	for i := range s.Trials {
		if s.Trials[i].VsBaseline != nil {
			h.Comparisons++
		}
	}
	if best == base {
		mark(best)
		h.BestIsBase = true
		h.Text = fmt.Sprintf("The baseline has the best estimate: %s %s; no swept setting beat it.", Num(best.Value.Center), s.Metric.Unit)
		if h.Comparisons == 0 {
			h.Text = fmt.Sprintf("Only the baseline ran: %s %s; no swept setting was measured against it.", Num(best.Value.Center), s.Metric.Unit)
		}
		return h
	}
	level := s.Design.SelectionLevel(s.Threshold(), h.Comparisons)
	c := stats.Compare(best.Launches.Values, base.Launches.Values, s.Metric, level)
	if !c.Winner() {
		// The best estimate is no decided winner (a noisy trial, or one
		// launch where nothing else has an interval): another trial shown
		// beyond δ at the same corrected level is, and the headline names it
		// rather than say that nothing beat the baseline.
		for i := range s.Trials {
			t := &s.Trials[i]
			if t == base || t == best || !t.OK() || t.VsBaseline == nil {
				continue
			}
			if ct := stats.Compare(t.Launches.Values, base.Launches.Values, s.Metric, level); ct.Winner() && (!c.Winner() || ct.Ratio > c.Ratio) {
				best, c = t, ct
			}
		}
	}
	mark(best)
	h.Comparison = &c
	if c.Winner() { // a winner is named only when it beat the baseline by more than δ
		h.Text = fmt.Sprintf("Best trial %s (%s): %s: %s (%s).",
			best.ID, labelOf(best), vsBaseline(c, s.Metric), c.VerdictText(), headlineQualifier(c, h.Comparisons))
		return h
	}
	h.Text = fmt.Sprintf("No setting was shown to beat the baseline by more than %s; the best estimate, %s (%s), is %s: %s (%s).",
		stats.PercentText(s.Threshold()), labelOf(best), best.ID, c.VerdictText(), vsBaseline(c, s.Metric), headlineQualifier(c, h.Comparisons))
	return h
}

// withIntervals is the trials the headline picks its best from (recs in
// s.Trials' order): the baseline always, and of the swept trials
// those with an interval (two or more clean launches) when any swept trial
// has one, so that one lucky launch does not take the headline from trials
// that were measured (nil for the others); every trial when no swept trial
// has an interval. The baseline stays a candidate either way: dropping it
// would call a lower trial the best estimate, and keeping it alone would
// call it best over trials it was never compared with.
func withIntervals(s *Summary, recs []*store.TrialRecord) []*store.TrialRecord {
	out := make([]*store.TrialRecord, len(recs))
	any := false
	for i, r := range recs {
		if s.Trials[i].Baseline {
			out[i] = r
		} else if r != nil && s.Trials[i].Launches.N() >= 2 { // the clean launches buildTrial counted
			out[i], any = r, true
		}
	}
	if !any {
		return recs
	}
	return out
}

// vsBaseline is a headline's ratio against the baseline in words that read
// right whichever way the metric is better: "1.20× [1.13, 1.28] the
// baseline's samples/s", and for step time or memory, where the ratio is the
// baseline's over the trial's, "1.20× [1.13, 1.28] the baseline (its ms over
// this trial's)".
func vsBaseline(c stats.Comparison, m stats.Metric) string {
	if m.HigherIsBetter {
		return fmt.Sprintf("%s the baseline's %s", c.RatioText(), m.Unit)
	}
	return fmt.Sprintf("%s the baseline (its %s over this trial's)", c.RatioText(), m.Unit)
}

// headlineQualifier says what the headline's interval is.
func headlineQualifier(c stats.Comparison, k int) string {
	if !c.Bounded() {
		return vsLaunches(c.NTrial, c.NBase)
	}
	q := fmt.Sprintf("%s interval", PercentConf(c.Confidence))
	if k > 1 {
		q += fmt.Sprintf(", corrected for picking the best of %d trials", k)
	}
	return q + "; " + vsLaunches(c.NTrial, c.NBase)
}

// PercentConf is a confidence level as "95%" or "99.5%".
func PercentConf(c float64) string { return stats.PercentText(c) }

// comparableOf are the facts compare checks before matching two runs.
func comparableOf(m *store.Manifest, metric stats.Metric) Comparable {
	c := Comparable{Metric: metric.Name}
	fam, _ := m.Model["family"].(string)
	preset, _ := m.Model["preset"].(string)
	c.Model = fam + "/" + preset
	if l := stats.Number(m.Model["layers"]); l > 0 {
		c.Model += fmt.Sprintf(" layers=%d", int(l))
	}
	if hd := stats.Number(m.Model["hidden"]); hd > 0 {
		c.Model += fmt.Sprintf(" hidden=%d", int(hd))
	}
	dev, _ := m.Workload["device_resolved"].(string)
	if dev == "" {
		dev, _ = m.Workload["device"].(string)
	}
	steps, warm := stats.Number(m.Workload["steps"]), stats.Number(m.Workload["warmup_steps"])
	c.Workload = fmt.Sprintf("%d steps after %d warm-up", int(steps), int(warm))
	if ws, ms := stats.Number(m.Workload["warmup_seconds"]), stats.Number(m.Workload["measure_seconds"]); ws > 0 || ms > 0 {
		c.Workload += fmt.Sprintf(" (floors %gs warm-up, %gs measured)", ws, ms) // windows by time: steps are minimums
	}
	if dev != "" {
		c.Workload = dev + ", " + c.Workload
	}
	var names []string
	for _, g := range m.Host.GPUs {
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	c.GPU = strings.Join(names, ", ")
	fillScale(&c, m.Workload)
	return c
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
		Driver: m.Host.Driver, CUDADriver: m.Host.CUDADriver, Topology: ansi.Strip(m.Host.TopoMatrix),
		Nodes: 1 + len(m.Host.Nodes), Model: m.Model, Workload: m.Workload, Env: m.Env,
	}
	for _, g := range m.Host.GPUs {
		p.GPUs = append(p.GPUs, fmt.Sprintf("%d: %s (%s)", g.Index, g.Name, units.Bytes(int64(g.MemBytes))))
		if g.UUID != "" {
			p.GPUUUIDs = append(p.GPUUUIDs, g.UUID)
		}
	}
	p.RankGPUs, p.BNBuffers = rankGPUs(run), bnBufferFact(bnBufferTrials(run))
	p.CuDNNLoaded, p.Libraries = rankLibraries(run)
	if e := m.Engine; e != nil {
		p.Torch, p.CUDA, p.NCCL, p.CuDNN = e.Torch, e.CUDA, e.NCCL, engine.CuDNNVersion(e.CuDNN)
	}
	return p
}

// noValueWhy says why trials that ran to the end have no value of the
// objective.
func noValueWhy(s *Summary) string {
	if s.Metric.Name == "memory" {
		for _, t := range s.Trials {
			if t.Memory != nil && t.Memory.NA == naCPU {
				return "the engine measures no device memory on the CPU: objective memory needs a GPU"
			}
		}
		return "no launch recorded reserved device memory"
	}
	return "no clean launch measured " + s.Metric.Name
}
