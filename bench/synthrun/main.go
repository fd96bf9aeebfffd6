// Command synthrun writes a synthetic run directory of many trials for the
// readers' memory benchmark (scripts/bench-huge-run.sh): a manifest whose
// plan sweeps one knob over -trials values (every trial differs from every
// other in that knob alone: the checklist's worst case) and one ok record per
// trial with -repeats launches of -steps measured steps on one rank. The
// numbers are synthetic (a deterministic pseudo-random step time around
// 10 ms), labelled so in the manifest: it measures the tools, not a machine.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

func main() {
	out := flag.String("out", "", "the run directory to create (must not exist)")
	trials := flag.Int("trials", 20000, "trials (one knob value each)")
	repeats := flag.Int("repeats", 3, "launches per trial")
	steps := flag.Int("steps", 10, "measured steps per launch")
	flag.Parse()
	if *out == "" || *trials < 2 || *repeats < 1 || *steps < 1 {
		fmt.Fprintln(os.Stderr, "usage: synthrun -out DIR [-trials N] [-repeats R] [-steps S]")
		os.Exit(2)
	}
	if err := write(*out, *trials, *repeats, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "synthrun:", err)
		os.Exit(3)
	}
}

func write(dir string, n, repeats, steps int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	created := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	m := store.Manifest{Schema: store.SchemaVersion, RunID: filepath.Base(dir), Study: "synthetic",
		StudyPath: "synthetic.yaml", StudyText: studyText,
		Created: created, Command: "synthrun", Baseline: map[string]string{"micro_batch": "1"},
		Objective:   store.Objective{Metric: "throughput", Goal: "max"},
		Workload:    map[string]any{"device": "cpu", "ranks": 1, "steps": steps, "repeats": repeats},
		Measurement: &store.Measurement{Repeats: repeats, Alpha: 0.05, LookAlpha: 0.05, Interleave: true},
		Model:       map[string]any{"family": "gpt", "preset": "tiny"}, Env: map[string]string{},
		Host: store.Host{Hostname: "synthetic", OS: "linux", CPU: "synthetic", CPUs: 1}}
	for i := 0; i < n; i++ {
		m.Plan = append(m.Plan, store.PlannedTrial{ID: id(i), Index: i, Knobs: knobs(i), Changed: changed(i)})
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "trials.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		rec := store.TrialRecord{Schema: store.SchemaVersion, ID: id(i), Index: i, Knobs: knobs(i), Changed: changed(i),
			Outcome: store.OK, FailedRank: -1, Attempts: 1, Started: created, Finished: created.Add(time.Second),
			Command: "casestudy run synthetic.yaml --trial " + id(i)}
		for r := 0; r < repeats; r++ {
			rank := store.RankRecord{Rank: 0, LastStep: steps - 1}
			for s := 0; s < steps; s++ {
				ms := 10 + float64(i%7) + rng.Float64()
				rank.Steps = append(rank.Steps, engine.StepMetrics{Step: s, Loss: 5 - float64(s)/float64(steps), GradNorm: 1,
					StepMS: ms, Samples: 2, Tokens: 32, SamplesPerS: 2000 / ms, TokensPerS: 32000 / ms})
			}
			rep := store.RepeatRecord{Repeat: r, Outcome: store.OK, Ranks: []store.RankRecord{rank}}
			rep.SamplesPerS, rep.TokensPerS = measure.Throughput(rep.Ranks)
			rep.Summary = measure.SummarizeRepeat(&rep)
			rec.Repeats = append(rec.Repeats, rep)
		}
		rec.Summary = measure.SummarizeTrial(rec.Repeats, measure.SummaryOptions{Metric: stats.Metrics["throughput"]})
		line, err := json.Marshal(&rec)
		if err != nil {
			return err
		}
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// studyText is the manifest's study: what check re-reads for its thresholds.
const studyText = `# written by bench/synthrun: a synthetic run, not a measurement
name: synthetic
model: {family: gpt, preset: tiny, micro_batch: 1, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 10, repeats: 3}
sweep:
  strategy: grid
  knobs: {micro_batch: [1, 2]}
`

func id(i int) string { return fmt.Sprintf("s%07d", i) }

func knobs(i int) map[string]string { return map[string]string{"micro_batch": strconv.Itoa(i + 1)} }

func changed(i int) []string {
	if i == 0 {
		return []string{}
	}
	return []string{"micro_batch"}
}
