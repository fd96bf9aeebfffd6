package timeline

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/casestudy/casestudy/store"
)

// Machine names what an estimate must match in an earlier run: the study, its
// model, the device the trials ran on and the GPU model ("" matches any).
type Machine struct {
	Study, Family, Preset string
	Device                string // cpu | cuda; "" or auto: any
	GPU                   string // NVML's name of GPU 0, e.g. "NVIDIA H200"
}

// MaxRuns is how many of the newest matching runs an estimate reads.
const MaxRuns = 10

// FindRuns reads the run directories under root/<study>/ that match m, newest
// first (at most MaxRuns). Directories that do not read are skipped.
func FindRuns(root string, m Machine) []*store.Run {
	dirs, _ := filepath.Glob(filepath.Join(root, store.SafeName(m.Study), "*", "manifest.json"))
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // run IDs start with the UTC time
	var out []*store.Run
	for _, d := range dirs {
		if len(out) == MaxRuns {
			break
		}
		run, err := store.ReadRun(filepath.Dir(d))
		if err != nil || !matches(run.Manifest, m) {
			continue
		}
		out = append(out, run)
	}
	return out
}

func matches(man store.Manifest, m Machine) bool {
	if man.Study != m.Study || fmt.Sprint(man.Model["family"]) != m.Family || fmt.Sprint(man.Model["preset"]) != m.Preset {
		return false
	}
	if m.Device != "" && m.Device != "auto" && fmt.Sprint(man.Workload["device_resolved"]) != m.Device {
		return false
	}
	if m.GPU != "" && fmt.Sprint(man.Workload["device_resolved"]) == "cuda" {
		return len(man.Host.GPUs) > 0 && man.Host.GPUs[0].Name == m.GPU
	}
	return true
}

// Plan is what is about to run: the trials (by stable ID) and their launches.
type Plan struct {
	Trials      []string
	Repeats     int
	WarmupSteps int
	Steps       int
	// WarmupSeconds and MeasureSeconds are the window floors that apply
	// (study.Workload.Windows): a launch's warm-up after its first step and
	// its measured window last at least this long.
	WarmupSeconds, MeasureSeconds float64
}

// Estimate is how long a plan should take, from earlier launches.
type Estimate struct {
	Total     time.Duration `json:"total_ns"`
	Launches  int           `json:"launches"`
	Runs      int           `json:"runs"`         // earlier runs it drew on
	Samples   int           `json:"samples"`      // earlier launches it drew on
	FixedMS   float64       `json:"fixed_ms"`     // median fixed cost per launch
	StepMS    float64       `json:"step_ms"`      // median wall time per step
	OwnTrials int           `json:"own_trials"`   // trials estimated from their own earlier launches
	Dirs      []string      `json:"dirs"`         // the earlier run directories
	Method    string        `json:"method"`       // how it is computed, in a sentence
	Measured  float64       `json:"measured_pct"` // expected share of the measured steps
}

// launchCost is one earlier launch: what it cost besides the steps, and per
// step after the first.
type launchCost struct{ fixedMS, stepMS float64 }

// EstimatePlan estimates a plan from earlier runs. Each earlier ok launch with
// a timeline splits into a fixed cost (its wall time minus the warm-up steps
// after the first and the measured steps: start-up, the first step, teardown
// and the runner's share) and a wall time per step; a planned launch costs
// fixed + (warmup − 1 + steps) × step, with the trial's own medians where it
// ran before and the medians over every earlier launch otherwise. Nil when
// no earlier launch has a timeline.
func EstimatePlan(runs []*store.Run, p Plan) *Estimate {
	byTrial := map[string][]launchCost{}
	var all []launchCost
	e := &Estimate{}
	for _, run := range runs {
		used := false
		for _, rec := range run.Trials {
			for _, rp := range rec.Repeats {
				if c, ok := costOf(rp); ok {
					byTrial[rec.ID] = append(byTrial[rec.ID], c)
					all = append(all, c)
					used = true
				}
			}
		}
		if used {
			e.Runs++
			e.Dirs = append(e.Dirs, run.Dir)
		}
	}
	if len(all) == 0 {
		return nil
	}
	e.Samples = len(all)
	e.FixedMS, e.StepMS = medianCost(all)
	totalMS, measuredMS := 0.0, 0.0
	for _, id := range p.Trials {
		fixed, step := e.FixedMS, e.StepMS
		if own := byTrial[id]; len(own) > 0 {
			fixed, step = medianCost(own)
			e.OwnTrials++
		}
		n := float64(max(p.Repeats, 1))
		warmMS := max(float64(max(p.WarmupSteps-1, 0))*step, 1000*p.WarmupSeconds)
		windowMS := max(float64(p.Steps)*step, 1000*p.MeasureSeconds)
		totalMS += n * (fixed + warmMS + windowMS)
		measuredMS += n * windowMS
	}
	e.Launches = len(p.Trials) * max(p.Repeats, 1)
	e.Total = time.Duration(totalMS * float64(time.Millisecond))
	if totalMS > 0 {
		e.Measured = 100 * measuredMS / totalMS
	}
	e.Method = fmt.Sprintf("each launch = fixed cost + (warm-up − 1 + measured steps) × time per step, from %s of %s: "+
		"the fixed cost (start-up, first step, teardown, the runner's share; median %s) and the time per step (median %s) "+
		"are each trial's own medians where it ran before (%d of %d trials), else the medians over all",
		count(e.Samples, "earlier launch", "earlier launches"), count(e.Runs, "run", "runs"), Seconds(e.FixedMS), Seconds(e.StepMS),
		e.OwnTrials, len(p.Trials))
	return e
}

// costOf splits an earlier launch; false when it has no usable timeline.
func costOf(rp store.RepeatRecord) (launchCost, bool) {
	tl := rp.Timeline
	if rp.Outcome != store.OK || tl == nil || len(rp.Ranks) == 0 {
		return launchCost{}, false
	}
	r0 := rp.Ranks[0]
	n := max(r0.WarmupSteps-1, 0) + len(r0.Steps)
	stepsMS := tl.PhaseMS(PhaseWarmup) + tl.PhaseMS(PhaseMeasured)
	if n == 0 || stepsMS <= 0 {
		return launchCost{}, false
	}
	fixed := tl.WallMS() - stepsMS
	if fixed < 0 { // an edited record, or clocks that disagree: no usable split (audit N22)
		return launchCost{}, false
	}
	return launchCost{fixedMS: fixed, stepMS: stepsMS / float64(n)}, true
}

func medianCost(cs []launchCost) (fixed, step float64) {
	f := make([]float64, len(cs))
	s := make([]float64, len(cs))
	for i, c := range cs {
		f[i], s[i] = c.fixedMS, c.stepMS
	}
	return median(f), median(s)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Seconds formats milliseconds for people: "12 ms", "4.1 s", "2m05s".
func Seconds(ms float64) string {
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2g ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case ms < 60000:
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
}

// ETA is the time the remaining launches should take at the pace of the
// finished ones: elapsed / done × (total − done). Zero when nothing finished
// or nothing remains. The live progress line and `casestudy status` share it.
func ETA(elapsed time.Duration, done, total int) time.Duration {
	if done <= 0 || total <= done {
		return 0
	}
	return time.Duration(float64(elapsed) / float64(done) * float64(total-done))
}

// Progress is how far a run got, from its directory.
type Progress struct {
	Planned  int           `json:"planned_launches"`  // planned trials × repeats (greedy: grows by round; repeats: auto, its maximum)
	Started  int           `json:"started_launches"`  // launches with a log
	Finished int           `json:"finished_launches"` // started minus the one in flight
	Elapsed  time.Duration `json:"elapsed_ns"`        // from the manifest's creation to now, or to the last record when done
	ETA      time.Duration `json:"eta_ns"`            // 0 when done or unknown
	// AtMost: the ETA is an upper bound (repeats: auto stops each trial when
	// it is decided, at most at max_repeats; a time budget ends the run).
	AtMost bool `json:"eta_at_most,omitempty"`
	Done   bool `json:"done"` // every planned trial has a record, none interrupted
}

// RunProgress reads a run directory's progress at now: the launches started
// are the rank-0 logs under logs/ (one per launch, kept for retried ones).
func RunProgress(run *store.Run, now time.Time) Progress {
	m := run.Manifest
	repeats, auto := launchesPerTrial(m)
	recorded := map[string]bool{}
	var last time.Time
	launches := 0 // recorded in trials.jsonl: counts where the logs are gone (a copied run)
	for _, t := range run.Trials {
		// An interrupted trial's record says where it stopped: --resume runs it again.
		recorded[t.ID] = t.Outcome != store.Interrupted
		launches += len(t.Repeats)
		if t.Finished.After(last) {
			last = t.Finished
		}
	}
	p := Progress{Planned: len(m.Plan) * repeats, Done: len(m.Plan) > 0}
	for _, t := range m.Plan {
		p.Done = p.Done && recorded[t.ID]
	}
	logs, _ := filepath.Glob(filepath.Join(run.Dir, "logs", "*", "rank0.r*.log"))
	p.Started = max(len(logs), launches)
	p.Planned = max(p.Planned, p.Started)
	if p.Done { // what ran, not the most repeats: auto would have allowed
		p.Planned = p.Started
	}
	p.Finished = p.Started
	end := now
	if p.Done {
		end = last
	} else if p.Started > 0 && !runEnded(run, logs) {
		p.Finished-- // the newest launch is still running
	}
	p.Elapsed = max(0, end.Sub(m.Created)).Round(time.Second)
	if !p.Done {
		p.ETA = ETA(p.Elapsed, p.Finished, p.Planned).Round(time.Second)
		p.AtMost = auto
		if mm := m.Measurement; mm != nil && mm.MaxTimeS > 0 && p.ETA > 0 {
			left := max(0, time.Duration(mm.MaxTimeS*float64(time.Second))-p.Elapsed).Round(time.Second)
			if left < p.ETA { // no round starts past the budget: at most one more round's time
				p.ETA, p.AtMost = left, true
			}
		}
	}
	return p
}

// launchesPerTrial is the most launches a trial of the run gets (the fixed
// repeats, or repeats: auto's maximum, when auto is true), from the
// manifest's measurement (workload.repeats for runs recorded before it).
func launchesPerTrial(m store.Manifest) (n int, auto bool) {
	if mm := m.Measurement; mm != nil {
		if mm.Auto {
			return max(mm.MaxRepeats, 1), true
		}
		return max(mm.Repeats, 1), false
	}
	if v, ok := m.Workload["repeats"].(float64); ok && v > 1 {
		return int(v), false
	}
	return 1, false
}

// runEnded says whether every started launch belongs to a committed trial
// (nothing is in flight: the run stopped between trials).
func runEnded(run *store.Run, logs []string) bool {
	recorded := map[string]bool{}
	for _, t := range run.Trials {
		recorded[store.SafeName(t.ID)] = true
	}
	for _, l := range logs {
		if !recorded[filepath.Base(filepath.Dir(l))] {
			return false
		}
	}
	return true
}
