package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goodRun writes a small valid run and returns its directory.
func goodRun(t *testing.T) string {
	t.Helper()
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s", RunID: "r", Plan: []PlannedTrial{{ID: "t1"}, {ID: "t2"}}}))
	require.NoError(t, w.Append(&TrialRecord{ID: "t1", Outcome: OK}))
	require.NoError(t, w.Close())
	return w.Dir
}

// readWithin reads dir and fails the test when ReadRun blocks.
func readWithin(t *testing.T, dir string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := ReadRun(dir); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("ReadRun(%s) blocked", dir)
		return nil
	}
}

// TestReadersOpenOnlyRegularFiles (audit N8, K-29..34): a FIFO, a device or
// a directory where manifest.json or trials.jsonl belongs is refused at once,
// naming the file and what it is; nothing blocks and nothing grows.
func TestReadersOpenOnlyRegularFiles(t *testing.T) {
	for _, name := range []string{"manifest.json", "trials.jsonl"} {
		for _, kind := range []string{"fifo", "/dev/zero", "dir"} {
			t.Run(name+" "+kind, func(t *testing.T) {
				dir := goodRun(t)
				p := filepath.Join(dir, name)
				require.NoError(t, os.Remove(p))
				switch kind {
				case "fifo":
					require.NoError(t, syscall.Mkfifo(p, 0o644))
				case "dir":
					require.NoError(t, os.Mkdir(p, 0o755))
				default:
					require.NoError(t, os.Symlink(kind, p))
				}
				err := readWithin(t, dir)
				require.Error(t, err)
				assert.Contains(t, err.Error(), p)
				assert.Contains(t, err.Error(), "not a regular file")
			})
		}
	}
}

// TestReadersRefuseWhatNoCasestudyWrites (audit N17, K-22..28): a null or
// empty manifest, a plan with an ID twice, a trial recorded twice, an
// unknown outcome and a line beyond the cap are refused with the file named.
func TestReadersRefuseWhatNoCasestudyWrites(t *testing.T) {
	for _, tc := range []struct {
		name, file, text, want string
	}{
		{"null manifest", "manifest.json", "null", "has no schema"},
		{"empty manifest", "manifest.json", "{}", "has no schema"},
		{"plan twice", "manifest.json", `{"schema":1,"plan":[{"id":"a"},{"id":"a"}]}`, `repeats trial id "a"`},
		{"trial twice", "trials.jsonl", `{"schema":1,"id":"t1","outcome":"ok"}` + "\n" + `{"schema":1,"id":"t1","outcome":"ok"}` + "\n", "recorded twice"},
		{"unknown outcome", "trials.jsonl", `{"schema":1,"id":"t1","outcome":"weird"}` + "\n", `"weird"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := goodRun(t)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.text), 0o644))
			err := readWithin(t, dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), filepath.Join(dir, tc.file))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	dir := goodRun(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"),
		[]byte(`{"schema":1,"id":"t1","outcome":"interrupted"}`+"\n"+`{"schema":1,"id":"t1","outcome":"ok"}`+"\n"), 0o644))
	require.NoError(t, readWithin(t, dir), "an interrupted record and its rerun")

	// a trial the plan of a sweep planned whole does not hold (K-25); greedy plans later rounds as it goes
	for strategy, refused := range map[string]bool{"list": true, "grid": true, "greedy": false} {
		dir := goodRun(t)
		m := fmt.Sprintf(`{"schema":1,"study":"s","workload":{"strategy":%q},"plan":[{"id":"t1"}]}`, strategy)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"),
			[]byte(`{"schema":1,"id":"t9","outcome":"ok"}`+"\n"+`{"schema":1,"id":"skipped-ab","outcome":"skipped"}`+"\n"), 0o644))
		err := readWithin(t, dir)
		if refused {
			require.Error(t, err, strategy)
			assert.Contains(t, err.Error(), "trial t9 is not in the plan")
		} else {
			require.NoError(t, err, strategy)
		}
	}
}

// TestOverlongLineNamesTheFile (audit K-33): a line beyond LineLimit is an
// error that names the file and line, not "bufio.Scanner: token too long".
func TestOverlongLineNamesTheFile(t *testing.T) {
	defer func(n int) { lineLimit = n }(lineLimit)
	lineLimit = 1 << 20
	p := filepath.Join(t.TempDir(), "trials.jsonl")
	f, err := os.Create(p)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":1,"id":"t0","outcome":"ok"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(lineLimit)+64)) // a sparse tail of NULs without a newline... then one
	_, err = f.WriteAt([]byte("\n"), int64(lineLimit)+63)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = ReadTrials(p)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), p+":2"), err.Error())
}
