package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	knobreg "github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Measured is the "What was measured" block at the top of every report: the
// model, the workload of the baseline, the study's question, the sweep, how
// each trial was measured and on what machine, so that a reader who gets
// only the report can tell what was benchmarked.
type Measured struct {
	Subtitle    string         `json:"subtitle"` // all of it in one line
	Family      string         `json:"family,omitempty"`
	Preset      string         `json:"preset,omitempty"`
	Params      int64          `json:"params,omitempty"`
	Shapes      map[string]int `json:"shapes,omitempty"`
	Precision   string         `json:"precision,omitempty"` // the baseline's
	Graphs      string         `json:"graphs,omitempty"`    // the baseline's graphs knob
	MicroBatch  int            `json:"micro_batch,omitempty"`
	GradAccum   int            `json:"grad_accum,omitempty"`
	DataRanks   int            `json:"data_parallel_ranks,omitempty"`
	GlobalBatch int            `json:"global_batch,omitempty"` // samples per optimizer step of the baseline
	// Question is the study's description.
	Question string `json:"question,omitempty"`
	Strategy string `json:"strategy,omitempty"`
	Trials   int    `json:"trials"`  // trials in the plan (dropped combinations not counted)
	Dropped  int    `json:"dropped"` // combinations dropped before running
	Warmup   int    `json:"warmup_steps"`
	Steps    int    `json:"steps"` // measured steps per launch (the window)
	// Launches is the launches per trial as planned ("auto: 5 to 12, looks
	// at 5, 8, 12" or "3"); LaunchesMin/Max are those that ran.
	Launches    string  `json:"launches"`
	LaunchesMin int     `json:"launches_min,omitempty"`
	LaunchesMax int     `json:"launches_max,omitempty"`
	Threshold   float64 `json:"threshold"`
	Machine     string  `json:"machine"`
	// Caveats say where a winning setting changes the training recipe.
	Caveats []string `json:"caveats,omitempty"`
	// Confirm is the suggested confirmation study, nil without two decided
	// winners (or when the study text cannot be rewritten).
	Confirm *Confirm `json:"confirm,omitempty"`
}

// measuredOf builds the block from the run's manifest and the summary.
func measuredOf(m *store.Manifest, s *Summary, run *store.Run) *Measured {
	w := &Measured{Question: strings.TrimSpace(descriptionOf(m.StudyText)), Strategy: s.Strategy,
		Trials: len(m.Plan), Dropped: len(s.Dropped), Threshold: s.Threshold(), Machine: SetupLine(&s.Provenance)}
	if w.Trials == 0 {
		w.Trials = len(s.Trials) - s.Counts[string(store.Skipped)]
	}
	w.Family, _ = m.Model["family"].(string)
	w.Preset, _ = m.Model["preset"].(string)
	w.Warmup, w.Steps = int(stats.Number(m.Workload["warmup_steps"])), int(stats.Number(m.Workload["steps"]))
	w.Launches = launchPlan(s.Design)
	base := baselineTrial(s)
	if base == nil && len(s.Trials) > 0 {
		for i := range s.Trials {
			if s.Trials[i].Baseline {
				base = &s.Trials[i]
			}
		}
	}
	if base != nil {
		w.Precision, w.Graphs = base.Knobs["precision"], base.Knobs["graphs"]
		w.MicroBatch, _ = strconv.Atoi(base.Knobs["micro_batch"])
		w.GradAccum, _ = strconv.Atoi(base.Knobs["grad_accum"])
	}
	for i := range run.Trials {
		rec := &run.Trials[i]
		if info := firstInfo(rec); info != nil && (w.Params == 0 || (base != nil && rec.ID == base.ID)) {
			w.Params, w.Shapes = info.Params, info.Shapes
			w.Family, w.Preset = info.Family, info.Preset
			if info.WorldSize > 0 {
				w.DataRanks = knobreg.LayoutOf(rec.Knobs, info.WorldSize).DP // ranks / (tp.degree x stages)
			}
		}
	}
	if w.DataRanks == 0 { // no engine description: the workload's ranks
		if r := int(stats.Number(m.Workload["ranks"])); r > 0 && base != nil {
			w.DataRanks = knobreg.LayoutOf(base.Knobs, r).DP
		}
	}
	if w.MicroBatch == 0 && w.Shapes != nil {
		w.MicroBatch = w.Shapes["micro_batch"]
	}
	if w.MicroBatch > 0 {
		w.GlobalBatch = w.MicroBatch * max(1, w.GradAccum) * max(1, w.DataRanks)
	}
	for _, t := range s.Trials {
		if n := t.Value.N; n > 0 {
			if w.LaunchesMin == 0 || n < w.LaunchesMin {
				w.LaunchesMin = n
			}
			w.LaunchesMax = max(w.LaunchesMax, n)
		}
	}
	w.Subtitle = w.subtitle()
	w.Caveats = recipeCaveats(s, w)
	return w
}

// firstInfo is the engine's description of the trial's model, from its
// first launch that has one.
func firstInfo(rec *store.TrialRecord) *engineInfo {
	for _, r := range rec.Repeats {
		for _, rk := range r.Ranks {
			if rk.Info != nil && rk.Info.Params > 0 {
				return rk.Info
			}
		}
	}
	return nil
}

func atoiOr(s string, def int) int {
	if v, err := strconv.Atoi(s); err == nil && v > 0 {
		return v
	}
	return def
}

// launchPlan says how many launches a trial was planned to get.
func launchPlan(d stats.Design) string {
	if d.Auto {
		out := fmt.Sprintf("auto: %d to %d launches a trial", d.MinRepeats, d.MaxRepeats)
		if len(d.Looks) > 0 {
			var looks []string
			for _, l := range d.Looks {
				looks = append(looks, strconv.Itoa(l))
			}
			out += ", decided at " + strings.Join(looks, ", ")
		}
		return out
	}
	if d.Repeats > 0 {
		return nLaunches(d.Repeats) + " a trial"
	}
	return "launches a trial not recorded"
}

// modelName is the family and its preset, "bert large", the preset left out
// where the family's name already ends in it: "resnet50", not "resnet50 50".
func (w *Measured) modelName() string {
	if w.Preset != "" && strings.HasSuffix(w.Family, w.Preset) {
		return w.Family
	}
	return strings.TrimSpace(w.Family + " " + w.Preset)
}

// modelText is "bert large, 336.2M parameters, layers 24, hidden 1024, ...".
func (w *Measured) modelText() string {
	var parts []string
	if name := w.modelName(); name != "" {
		parts = append(parts, name)
	}
	if w.Params > 0 {
		parts = append(parts, paramsText(w.Params)+" parameters")
	}
	for _, k := range slices.Sorted(maps.Keys(w.Shapes)) {
		if k != "micro_batch" {
			parts = append(parts, fmt.Sprintf("%s %d", k, w.Shapes[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// batchText is "micro_batch 32 × grad_accum 1 × 1 data-parallel rank = 32 samples per optimizer step".
func (w *Measured) batchText() string {
	if w.GlobalBatch == 0 {
		return ""
	}
	return fmt.Sprintf("micro_batch %d × grad_accum %d × %d data-parallel rank(s) = global batch %d samples per optimizer step",
		w.MicroBatch, max(1, w.GradAccum), max(1, w.DataRanks), w.GlobalBatch)
}

// measurementText is "5 warm-up + 50 measured steps per launch; auto: 5 to 12 ... (5 to 5 ran); threshold 5%".
func (w *Measured) measurementText() string {
	out := fmt.Sprintf("%d warm-up + %d measured steps per launch; %s", w.Warmup, w.Steps, w.Launches)
	if w.LaunchesMax > 0 {
		if w.LaunchesMin == w.LaunchesMax {
			out += fmt.Sprintf(" (%d ran each)", w.LaunchesMax)
		} else {
			out += fmt.Sprintf(" (%d to %d ran)", w.LaunchesMin, w.LaunchesMax)
		}
	}
	return out + fmt.Sprintf("; threshold δ = %s", PercentConf(w.Threshold))
}

func (w *Measured) subtitle() string {
	var parts []string
	name := w.modelName()
	if w.Params > 0 {
		name += " (" + paramsText(w.Params) + ")"
	}
	if name != "" {
		parts = append(parts, name)
	}
	if sl := w.Shapes["seq_len"]; sl > 0 {
		parts = append(parts, fmt.Sprintf("seq %d", sl))
	}
	if w.GlobalBatch > 0 {
		parts = append(parts, fmt.Sprintf("micro_batch %d, global batch %d", w.MicroBatch, w.GlobalBatch))
	}
	if w.Precision != "" {
		p := w.Precision
		if w.Graphs == "true" {
			p += " + CUDA graphs"
		}
		parts = append(parts, p)
	}
	if w.Strategy != "" {
		parts = append(parts, fmt.Sprintf("%s over %d trials", w.Strategy, w.Trials))
	}
	parts = append(parts, fmt.Sprintf("%d warm-up + %d steps", w.Warmup, w.Steps))
	if w.LaunchesMax > 0 {
		if w.LaunchesMin == w.LaunchesMax {
			parts = append(parts, nLaunches(w.LaunchesMax))
		} else {
			parts = append(parts, fmt.Sprintf("%d to %d launches", w.LaunchesMin, w.LaunchesMax))
		}
	}
	if w.Machine != "" {
		parts = append(parts, w.Machine)
	}
	return strings.Join(parts, "; ")
}

// rows are the block's lines as (label, text), in order, empty ones left out.
func (w *Measured) rows() [][2]string {
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	add("question", w.Question)
	add("model", w.modelText())
	add("batch", w.batchText())
	if w.Precision != "" {
		base := "precision " + w.Precision
		if w.Graphs != "" {
			base += ", graphs " + w.Graphs
		}
		add("baseline", base)
	}
	sweep := fmt.Sprintf("%d trials", w.Trials)
	if w.Strategy != "" {
		sweep = w.Strategy + ", " + sweep
	}
	if w.Dropped > 0 {
		sweep += fmt.Sprintf(" (%d combination(s) dropped before running)", w.Dropped)
	}
	add("sweep", sweep)
	add("measurement", w.measurementText())
	add("machine", w.Machine)
	return out
}

// descriptionOf is the study text's description ("" when none).
func descriptionOf(text string) string {
	doc := parseYAML(text)
	if doc == nil {
		return ""
	}
	if n := mapValue(doc, "description"); n != nil {
		return n.Value
	}
	return ""
}
