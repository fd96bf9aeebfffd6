package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the current output")

// golden compares got with testdata/golden/name (-update rewrites it).
// Absolute paths under the repository are written as $REPO.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = bytes.ReplaceAll(got, []byte(repoRoot(t)), []byte("$REPO"))
	path := filepath.Join(repoRoot(t), "cmd", "casestudy", "testdata", "golden", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/casestudy -run TestGoldenJSON -update to create it")
	assert.Equal(t, string(want), string(got), "%s differs (go test ./cmd/casestudy -run TestGoldenJSON -update, then review the diff)", name)
}

// TestGoldenJSON: the --json outputs scripts read, byte for byte.
func TestGoldenJSON(t *testing.T) {
	for _, tc := range []struct {
		file string
		args []string
		code int
	}{
		{"plan.json", []string{"plan", "--json", "studies/gpt/pipeline.yaml"}, 0},
		{"validate.json", []string{"validate", "--json", "studies/gpt/smoke.yaml", "cmd/casestudy/testdata/studies/bad.yaml"}, 2},
		{"history.json", []string{"history", "--json", "report/testdata/history/bert-grid"}, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			code, stdout, stderr := studyCLI(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			assert.Empty(t, stderr, "--json keeps standard error for problems only")
			golden(t, tc.file, []byte(stdout))
		})
	}

	t.Run("doctor.json", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, writeJSON(&buf, diagnose(fakeMachine(), "", "results")))
		golden(t, "doctor.json", buf.Bytes())
	})

	t.Run("run.json", func(t *testing.T) {
		run, err := store.ReadRun(filepath.Join(repoRoot(t), "report", "testdata", "runs", "bert-grid"))
		require.NoError(t, err)
		end := &runEnd{dir: run.Dir, study: &study.Study{Path: filepath.Join(repoRoot(t), "studies", "bert-grid.yaml")}, status: runComplete}
		sum := summarizeRun(run, end)
		var buf bytes.Buffer
		require.NoError(t, writeJSON(&buf, sum))
		golden(t, "run.json", buf.Bytes())
	})
}

// fakeMachine is a CPU machine with the engine built.
func fakeMachine() machine {
	return machine{
		host: func() store.Host {
			return store.Host{Hostname: "ci", CPU: "Test CPU", CPUs: 2, MemBytes: 24 << 30}
		},
		gpus: func() (provenance.GPUInfo, error) { return provenance.GPUInfo{}, errors.New("NVML: Driver Not Loaded") },
		smi:  func() string { return "" },
		topo: func() string { return "" },
		mps:  func() string { return "" },
		free: func(string) (uint64, error) { return 64 << 30, nil },
		engine: func(string) (string, engine.BuildInfo, error) {
			return "/opt/casestudy/lib/libcasestudy_engine.so", engine.BuildInfo{ABI: binding.ABIVersion, Torch: "1.13.0", Gloo: true}, nil
		},
	}
}

func TestDoctorText(t *testing.T) {
	var buf bytes.Buffer
	printDoctor(&buf, diagnose(fakeMachine(), "", "results"))
	out := buf.String()
	assert.Contains(t, out, "  ok    engine    /opt/casestudy/lib/libcasestudy_engine.so\n")
	assert.Contains(t, out, "  MISS  gpus      no NVIDIA driver (NVML: Driver Not Loaded)\n        fix: install the NVIDIA driver")
	assert.True(t, strings.HasSuffix(out, "\nusable for CPU studies (studies/*/smoke.yaml); GPU studies also need the NVIDIA driver, a CUDA engine build\n"), out)
}
