package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/internal/syncbuf"
)

// TestUsageExitStatus: every kind of bad usage exits 2 with a message that
// names what was wrong (README, "Exit statuses").
func TestUsageExitStatus(t *testing.T) {
	study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
	for _, tc := range []struct {
		desc   string
		args   []string
		stderr string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate" for "casestudy"`},
		{"misspelt command", []string{"valdiate", study}, `did you mean "validate"?`},
		{"unknown subcommand", []string{"bench", "allreduse"}, `unknown command "allreduse" for "casestudy bench"`},
		{"unknown flag", []string{"plan", study, "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"missing argument", []string{"plan"}, "accepts 1 arg(s), received 0"},
		{"negative kill grace", []string{"run", study, "--kill-grace", "-5s"},
			`invalid argument "-5s" for "--kill-grace" flag: out of range: give 100ms to 10m0s`},
		{"heartbeat timeout of 1ns", []string{"run", study, "--heartbeat-timeout", "1ns"},
			`invalid argument "1ns" for "--heartbeat-timeout" flag: out of range: give 3s to 24h0m0s`},
		{"not a duration", []string{"run", study, "--kill-grace", "soon"}, `"--kill-grace" flag: not a duration`},
		{"negative max trials", []string{"run", study, "--max-trials", "-1"}, "--max-trials -1: give 1 or more"},
		{"negative retries", []string{"run", study, "--retries", "-1"}, "--retries -1: give 0 or more"},
		{"bench timeout of 0", []string{"bench", "allreduce", "--timeout", "0s"}, `"--timeout" flag: out of range: give 1s to 24h0m0s`},
		{"unknown severity", []string{"check", t.TempDir(), "--fail-on", "fatal"}, `unknown severity "fatal"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			assert.Equal(t, exitcode.Input, code, stderr)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
	code, stdout, _ := runCLI(t)
	assert.Equal(t, 0, code, "casestudy alone prints its help")
	assert.Contains(t, stdout, "Available Commands")
}

// startMain starts this test binary as casestudy ARGS (TestMain runs runMain).
func startMain(t *testing.T, dir string, args ...string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	return cmd, out
}

func exitStatus(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitCode()
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not stop within 30 s", cmd.Args)
	}
	return -1
}

// TestSignalsStopEveryCommand: a command blocked on input (validate of a
// FIFO nobody writes) stops at SIGTERM, SIGINT and SIGHUP with 128 + the
// signal's number, and says why (issue 21, defect 10).
func TestSignalsStopEveryCommand(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}, {syscall.SIGHUP, 129}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "study.yaml")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			cmd, out := startMain(t, dir, "validate", fifo)
			waitForReader(t, fifo, cmd, out)
			require.NoError(t, cmd.Process.Signal(tc.sig))
			assert.Equal(t, tc.code, exitStatus(t, cmd), out.String())
			assert.Contains(t, out.String(), "casestudy: stopped by "+exitcode.SignalName(tc.sig))
		})
	}
}
