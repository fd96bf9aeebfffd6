package runner

import (
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/casestudy/casestudy/internal/version"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// NewManifest is a run's provenance: the tool, the study text and its sha256,
// the resolved plan, the host with its GPUs and topology, the engine's build
// and the relevant environment, the launch schedule and statistical design
// (DesignFor) and the command-line overrides of the workload.
func NewManifest(runID string, s *study.Study, plan *study.Plan, m *Machine, argv []string, env []string, overrides map[string]string) *store.Manifest {
	man := &store.Manifest{
		Schema: store.SchemaVersion, RunID: runID, Study: s.Name, StudyPath: s.Path,
		StudyText: string(s.Text), StudySHA256: s.SHA256, Created: time.Now().UTC(),
		Command:          strings.Join(argv, " "),
		Tool:             store.Tool{Version: version.Version, Commit: version.Commit(), Go: runtime.Version()},
		Baseline:         s.Baseline,
		Objective:        store.Objective{Metric: s.Objective.Metric, Goal: s.Objective.Goal},
		CompareThreshold: s.Compare.Threshold,
		CompareBaseline:  absPath(s.Compare.Baseline),
		Workload: map[string]any{
			"device": s.Workload.Device, "device_resolved": m.Device, "gpus": s.Workload.GPUs,
			"nodes": s.Workload.Nodes, "ranks": s.Workload.Ranks, "warmup_steps": s.Workload.WarmupSteps,
			"steps": s.Workload.Steps, "repeats": repeatsText(s.Workload.Repeats), "timeout": s.Workload.Timeout.String(),
			"seed": s.Workload.Seed, "threads": s.Workload.Threads, "interleave": s.Workload.Interleave, "rehearse": s.Workload.Rehearse,
			"strategy": plan.Strategy,
		},
		Model: map[string]any{"family": s.Model.Family, "preset": s.Model.Preset,
			"layers": s.Model.Layers, "hidden": s.Model.Hidden},
		Host:        provenance.ReadHost(m.NVML),
		Env:         provenance.RelevantEnv(env),
		Measurement: measure.DesignRecord(DesignFor(s, m.Device)),
	}
	man.InheritedEnv = InheritedEnv(env, plan)
	if s.Workload.GPUsAll {
		man.Workload["gpus_all"] = true // workload.gpus: all, resolved to "gpus" on this node
	}
	if s.Workload.WorldOfOne {
		man.Workload["world_of_one"] = true // one-rank trials as a data-parallel world of one
	}
	if len(overrides) > 0 {
		man.Overrides = overrides
	}
	// the window floors that applied (docs/study-format.md); absent: none
	if wu, ms := s.Workload.Windows(m.Device); wu > 0 || ms > 0 {
		man.Workload["warmup_seconds"], man.Workload["measure_seconds"] = wu, ms
	}
	for _, src := range s.Sources {
		man.Sources = append(man.Sources, store.StudySource{Path: src.Path, SHA256: src.SHA256, Text: string(src.Text)})
	}
	bi := m.Build
	man.Engine = &bi
	for _, t := range plan.Trials {
		man.Plan = append(man.Plan, store.PlannedTrial{ID: t.ID, Index: t.Index, Knobs: t.Knobs, Changed: t.Changed})
	}
	for _, d := range plan.Dropped {
		man.Dropped = append(man.Dropped, store.DroppedTrial{Knobs: d.Knobs, Reason: d.Reason})
	}
	return man
}

// repeatsText is workload.repeats as the manifest records it: a number, or
// "auto".
func repeatsText(n int) any {
	if n == 0 {
		return "auto"
	}
	return n
}

// absPath is p made absolute against the working directory (the folder the
// run started in); "" and URLs stay as they are, and so does p when the
// working directory cannot be read.
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) || strings.Contains(p, "://") {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
