package checklist

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// withNCCL records on rank 0 of every launch of trial id what NCCL chose.
func withNCCL(run *store.Run, id string, choices ...store.NCCLChoice) *store.Run {
	for i := range run.Trials {
		if run.Trials[i].ID != id {
			continue
		}
		for j := range run.Trials[i].Repeats {
			n := 0
			for _, c := range choices {
				n += c.Count
			}
			run.Trials[i].Repeats[j].Ranks[0].NCCL = &store.NCCLTuning{Lines: n, Choices: choices}
		}
	}
	return run
}

func TestNCCLForcedIgnored(t *testing.T) {
	b := func(id string, kv []string) spec {
		return spec{id: id, set: set(kv...), ranks: 2, thr: 100, stepMS: 10}
	}
	ring := store.NCCLChoice{Op: "AllReduce", Algo: "RING", Proto: "SIMPLE", Count: 40}
	res := evalOne(t, withNCCL(mkRun([]spec{b("auto", nil), b("tree", []string{"nccl.algo", "Tree"})}), "tree", ring),
		"nccl-forced-ignored", Config{})
	require.Equal(t, Finding, res.Status, res.Message)
	assert.Equal(t, Error, res.Severity)
	assert.Equal(t, []string{"tree"}, res.Trials)
	assert.Contains(t, res.Evidence[0], "nccl.algo=Tree: NCCL used RING×")

	res = evalOne(t, withNCCL(mkRun([]spec{b("auto", nil), b("simple", []string{"nccl.proto", "Simple"})}), "simple", ring),
		"nccl-forced-ignored", Config{})
	assert.Equal(t, Pass, res.Status, res.Message)

	res = evalOne(t, mkRun([]spec{b("auto", nil), b("tree", []string{"nccl.algo", "Tree"})}), "nccl-forced-ignored", Config{})
	assert.Equal(t, NotApplicable, res.Status, "no tuning lines: cannot tell")
	assert.Contains(t, res.Message, "no tuning lines")

	res = evalOne(t, mkRun([]spec{b("auto", nil)}), "nccl-forced-ignored", Config{})
	assert.Equal(t, NotApplicable, res.Status)
}

// Runs recorded before the runner kept NCCL's choices: the rule reads the
// rank logs.
func TestNCCLForcedIgnoredReadsOldLogs(t *testing.T) {
	run := mkRun([]spec{{id: "auto", ranks: 2, thr: 100, stepMS: 10}, {id: "ll", set: set("nccl.proto", "LL"), ranks: 2, thr: 90, stepMS: 11}})
	run.Dir = t.TempDir()
	log := filepath.Join(run.Dir, store.LogName("ll", 0, 0))
	require.NoError(t, os.MkdirAll(filepath.Dir(log), 0o755))
	require.NoError(t, os.WriteFile(log, []byte("h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"), 0o644))
	res := evalOne(t, run, "nccl-forced-ignored", Config{})
	assert.Equal(t, Pass, res.Status, res.Message)
}
