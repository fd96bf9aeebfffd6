package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// smoke is studies/gpt/smoke.yaml run once per test binary through the real
// engine (9 launches of the tiny GPT, about 40 s of CI's 2 cores), for the
// tests that read a real smoke run: TestRunSmokeEndToEnd checks the run and
// what plan, status and timeline say of it; TestCheckOnSmokeRun the
// checklist's verdicts on it. Both only read the run directory. TestMain
// removes it.
var smoke struct {
	once           sync.Once
	out            string // --out: the run directory is the one below it
	code           int
	stdout, stderr string
	err            error
}

// smokeRun runs the smoke study at its first call and returns its --out
// folder, the run directory and the run's stdout.
func smokeRun(t *testing.T) (out, dir, stdout string) {
	t.Helper()
	lib := engineLibOrSkip(t)
	smoke.once.Do(func() {
		t.Setenv(asMainEnv, "1") // the workers are this test binary
		t.Setenv(engine.EnvLibrary, lib)
		if smoke.out, smoke.err = os.MkdirTemp("", "casestudy-smoke-"); smoke.err != nil {
			return
		}
		study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
		smoke.code, smoke.stdout, smoke.stderr = runCLI(t, "run", study, "--out", smoke.out)
	})
	require.NoError(t, smoke.err)
	require.Equal(t, 0, smoke.code, "the smoke run\nstdout:\n%s\nstderr:\n%s", smoke.stdout, smoke.stderr)
	return smoke.out, onlyRunDir(t, smoke.out), smoke.stdout
}

func removeSmokeRun() {
	if smoke.out != "" {
		os.RemoveAll(smoke.out)
	}
}
