package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// TestRunRefusesBadFlagsBeforeWriting: flags run would misread or ignore are
// refused with exit status 2, a message naming the flag, and nothing written
// under --out: a bad --rdzv-addr left a run directory of not_run trials
// (host) or ran into an interrupted trial with exit status 3 (port); --out
// a file failed with exit status 3; --predict's and --submit's flags without
// them, --cores below 1, an unknown --nccl-algo and --out with --resume were
// accepted and ignored.
func TestRunRefusesBadFlagsBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "studies", "s.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	file := filepath.Join(dir, "afile")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	// a file where the study's folder under --out goes
	studyFile := filepath.Join(dir, "outs")
	require.NoError(t, os.MkdirAll(studyFile, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(studyFile, "s"), nil, 0o644))
	// a run to resume
	w, err := store.Create(filepath.Join(dir, "results"), "s", store.NewRunID(time.Now()),
		&store.Manifest{Schema: store.SchemaVersion, Study: "s", StudyPath: path})
	require.NoError(t, err)
	require.NoError(t, w.Close())

	out := filepath.Join(dir, "out")
	noEngine := filepath.Join(dir, "none.so")
	for _, tc := range []struct {
		desc string
		args []string
		want []string
	}{
		{"unresolvable host", []string{"--rdzv-addr", "bad host:99999"}, []string{"--rdzv-addr bad host:99999", "give 1 to 65535"}},
		{"port out of range", []string{"--rdzv-addr", "127.0.0.1:99999"}, []string{"--rdzv-addr 127.0.0.1:99999", `port "99999"`}},
		{"port not a number", []string{"--rdzv-addr", "127.0.0.1:http"}, []string{"--rdzv-addr 127.0.0.1:http", "give 1 to 65535"}},
		{"host unknown", []string{"--rdzv-addr", "no such host.invalid"}, []string{"--rdzv-addr no such host.invalid"}},
		{"host not of this machine", []string{"--rdzv-addr", "192.0.2.1:29500"}, []string{"--rdzv-addr 192.0.2.1:29500", "cannot listen on 192.0.2.1"}},
		{"nccl-algo without predict", []string{"--nccl-algo", "Foo"}, []string{"--nccl-algo goes with --predict N", "leave it out"}},
		{"topology without predict", []string{"--topology", "pcie-gen4-8"}, []string{"--topology goes with --predict N"}},
		{"kappa without predict", []string{"--kappa", "0", "--fit", "x.json"}, []string{"--fit, --kappa go with --predict N", "leave them out"}},
		{"cores below 1", []string{"--predict", "2", "--fit", "x.json", "--cores", "-5"}, []string{"--cores -5: give the cores the CPU ranks share, 1 or more"}},
		{"cores without predict", []string{"--cores", "4"}, []string{"--cores goes with --predict N"}},
		{"cores 0 with predict", []string{"--predict", "2", "--topology", "pcie-gen4-8", "--cores", "0"}, []string{"--cores 0: give"}},
		{"unknown nccl-algo", []string{"--predict", "2", "--topology", "pcie-gen4-8", "--nccl-algo", "Foo"}, []string{`--nccl-algo "Foo": give one of Ring, Tree`}},
		{"unknown nccl-proto", []string{"--predict", "2", "--topology", "pcie-gen4-8", "--nccl-proto", "LL64"}, []string{`--nccl-proto "LL64": give one of LL, LL128, Simple`}},
		{"nccl-proto with fit", []string{"--predict", "2", "--fit", "x.json", "--nccl-proto", "ll"}, []string{"--nccl-proto restricts the NCCL model of --topology"}},
		{"predict 0", []string{"--predict", "0"}, []string{"--predict 0: give the GPUs to predict for, 2 or more"}},
		{"partition without submit", []string{"--partition", "gpu"}, []string{"--partition goes with --launcher slurm --submit"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			// no engine library: a flag that is not refused ends at the
			// preflight (exit status 3) instead of running the study
			code, stdout, stderr := runCLI(t, append([]string{"run", path, "--out", out, "--engine-lib", noEngine}, tc.args...)...)
			assert.Equal(t, exitcode.Input, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			for _, want := range tc.want {
				assert.Contains(t, stderr, want)
			}
			assert.NoDirExists(t, out, "nothing written")
		})
	}

	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"out a file", []string{"run", path, "--out", file}, "--out " + file + ": " + file + " is a file, not a folder: give --out a folder"},
		{"out under a file", []string{"run", path, "--out", filepath.Join(file, "sub")}, file + ", on its path, is a file, not a folder"},
		{"study folder a file", []string{"run", path, "--out", studyFile}, filepath.Join(studyFile, "s") + ", on its path, is a file"},
		{"out with resume", []string{"run", "--resume", w.Dir, "--out", out}, "--out " + out + " with --resume: a resumed run writes into RUN_DIR itself"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, "--engine-lib", noEngine)...)
			assert.Equal(t, exitcode.Input, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}
	assert.NoDirExists(t, out)
	entries, err := os.ReadDir(studyFile)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing written beside the file")
	run, err := store.ReadRun(w.Dir)
	require.NoError(t, err)
	assert.Empty(t, run.Trials, "the resumed run is left alone")
}

// TestRdzvPort: HOST alone, HOST:PORT with a port of 0 (any) to 65535, IPv6
// addresses bracketed with a port or bare without one.
func TestRdzvPort(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1", "127.0.0.1:29500", "node1:1", "localhost:65535", "127.0.0.1:0", "::1", "[::1]:29500"} {
		assert.NoError(t, checkRdzvPort(ok), ok)
	}
	for _, bad := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:", ":29500", "host:port", "[::1]:70000"} {
		err := checkRdzvPort(bad)
		require.Error(t, err, bad)
		assert.Equal(t, exitcode.Input, exitcode.Of(err), bad)
		assert.Contains(t, err.Error(), "--rdzv-addr "+bad, bad)
	}
}

// TestPlanRehearseFlagsNeedRehearse: plan's --rehearse-* flags without
// --rehearse were accepted and ignored.
func TestPlanRehearseFlagsNeedRehearse(t *testing.T) {
	study := filepath.Join(repoRoot(t), "studies", "bert", "smoke.yaml")
	code, _, stderr := runCLI(t, "plan", study, "--rehearse-gpu-gib", "1")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "--rehearse-gpu-gib goes with --rehearse")
	code, _, stderr = runCLI(t, "plan", study, "--rehearse-gpus", "2", "--rehearse-distinct")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "--rehearse-distinct, --rehearse-gpus go with --rehearse")
	code, _, stderr = runCLI(t, "plan", study)
	assert.Equal(t, 0, code, stderr)
}
