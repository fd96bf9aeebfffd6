package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// baselineJSON is the baseline file casestudy baseline writes for a fixture
// run, decoded as plain JSON for a test to edit.
func baselineJSON(t *testing.T, fixture string) map[string]any {
	t.Helper()
	s := Build(readFixture(t, fixture), nil)
	s.Kind = KindBaseline
	s.DropLaunchDetail()
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, s))
	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	return m
}

func writeJSONFile(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, store.WriteFileAtomic(p, b))
	return p
}

func trialsOf(m map[string]any) []any { return m["trials"].([]any) }

func trialAt(m map[string]any, i int) map[string]any { return trialsOf(m)[i].(map[string]any) }

// firstWithLaunches is the index of the first trial holding launch values.
func firstWithLaunches(t *testing.T, m map[string]any) int {
	for i := range trialsOf(m) {
		if vs, _ := trialAt(m, i)["launches"].(map[string]any)["values"].([]any); len(vs) > 0 {
			return i
		}
	}
	t.Fatal("no trial with launch values")
	return -1
}

// A summary or baseline file is checked before compare trusts it: the
// objective's direction comes from casestudy (stats.Metrics), never from the
// file alone; trial IDs are unique; launch values finite and positive; the
// comparable facts present. Each refusal names the file and the field and
// exits 2 (read-only audit: a NEW file without "metric" turned a 20%
// slowdown into "1.25× faster", PASS, exit 0).
func TestReadSummaryRefusesUntrustedFiles(t *testing.T) {
	dir := t.TempDir()
	ok := writeJSONFile(t, dir, "ok.json", baselineJSON(t, "runs/bert-grid"))
	s, err := ReadSummary(ok)
	require.NoError(t, err, "a baseline casestudy wrote reads")
	assert.Equal(t, "throughput", s.Metric.Name)
	assert.True(t, s.Metric.HigherIsBetter)

	tests := []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"no metric", func(m map[string]any) { delete(m, "metric"); delete(m["comparable"].(map[string]any), "metric") }, "metric.name"},
		{"empty metric name", func(m map[string]any) { m["metric"].(map[string]any)["name"] = "" }, "metric.name"},
		{"unknown metric", func(m map[string]any) { m["metric"].(map[string]any)["name"] = "speed" }, "metric.name"},
		{"direction flipped", func(m map[string]any) { m["metric"].(map[string]any)["higher_is_better"] = false }, "metric.higher_is_better"},
		{"direction dropped", func(m map[string]any) { delete(m["metric"].(map[string]any), "higher_is_better") }, "metric.higher_is_better"},
		{"unit of another metric", func(m map[string]any) { m["metric"].(map[string]any)["unit"] = "ms" }, "metric.unit"},
		{"metric renamed, direction kept", func(m map[string]any) {
			m["metric"] = map[string]any{"name": "step_time", "unit": "ms", "higher_is_better": false}
		}, "objective.metric"},
		{"goal contradicts", func(m map[string]any) { m["objective"].(map[string]any)["goal"] = "min" }, "objective.goal"},
		{"goal unknown", func(m map[string]any) { m["objective"].(map[string]any)["goal"] = "up" }, "objective.goal"},
		{"blank model", func(m map[string]any) { m["comparable"].(map[string]any)["model"] = " " }, "comparable.model"},
		{"no workload", func(m map[string]any) { delete(m["comparable"].(map[string]any), "workload") }, "comparable.workload"},
		{"no comparable metric", func(m map[string]any) { m["comparable"].(map[string]any)["metric"] = "" }, "comparable.metric"},
		{"comparable metric of another objective", func(m map[string]any) { m["comparable"].(map[string]any)["metric"] = "memory" }, "comparable.metric"},
		{"negative GPU count", func(m map[string]any) { m["comparable"].(map[string]any)["gpus"] = -1 }, "comparable.gpus"},
		{"duplicate trial", func(m map[string]any) { m["trials"] = append(trialsOf(m), trialsOf(m)[0]) }, "trials[7].id"},
		{"empty trial id", func(m map[string]any) { trialAt(m, 0)["id"] = "" }, "trials[0].id"},
		{"zero launch value", func(m map[string]any) {
			i := firstWithLaunches(t, m)
			trialAt(m, i)["launches"].(map[string]any)["values"].([]any)[0] = 0
		}, ".launches.values[0]"},
		{"a launch's samples/s dropped", func(m map[string]any) {
			l := trialAt(m, firstWithLaunches(t, m))["launches"].(map[string]any)
			l["samples_per_s"] = l["samples_per_s"].([]any)[1:]
		}, ".launches.samples_per_s"},
		{"a repeat index added", func(m map[string]any) {
			l := trialAt(m, firstWithLaunches(t, m))["launches"].(map[string]any)
			l["repeats"] = append(l["repeats"].([]any), 9.0)
		}, ".launches.repeats"},
		{"threshold of 500%", func(m map[string]any) { m["compare_threshold"] = 5.0 }, "compare_threshold"},
		{"threshold of 100%", func(m map[string]any) { m["compare_threshold"] = 1.0 }, "compare_threshold"},
		{"negative threshold", func(m map[string]any) { m["compare_threshold"] = -0.05 }, "compare_threshold"},
		{"negative launch value", func(m map[string]any) {
			i := firstWithLaunches(t, m)
			trialAt(m, i)["launches"].(map[string]any)["values"].([]any)[1] = -3.5
		}, ".launches.values[1]"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := baselineJSON(t, "runs/bert-grid")
			tt.edit(m)
			p := writeJSONFile(t, dir, fmt.Sprintf("bad%d.json", i), m)
			_, err := ReadSummary(p)
			require.Error(t, err)
			var se *SummaryError
			require.True(t, errors.As(err, &se), "a SummaryError: %v", err)
			assert.Equal(t, p, se.Path)
			assert.Contains(t, se.Field, tt.field)
			assert.True(t, strings.HasPrefix(err.Error(), p+": "), err.Error())
			assert.Contains(t, err.Error(), "casestudy baseline RUN_DIR -o FILE", "says what to do")
			assert.Equal(t, exitcode.Input, exitcode.Of(err), "bad input: exit status 2")
			_, err = LoadSide(p)
			assert.ErrorAs(t, err, &se, "compare and export read it through LoadSide")
		})
	}
}

// The metric compare uses is casestudy's for the name the file gives: an
// alias reads as its objective.
func TestReadSummaryMetricFromCasestudy(t *testing.T) {
	m := baselineJSON(t, "runs/bert-grid")
	m["metric"] = map[string]any{"name": "samples_per_s", "higher_is_better": true}
	s, err := ReadSummary(writeJSONFile(t, t.TempDir(), "alias.json", m))
	require.NoError(t, err)
	assert.Equal(t, "throughput", s.Metric.Name)
	assert.Equal(t, "samples/s", s.Metric.Unit)
	assert.Equal(t, "throughput", s.Comparable.Metric)
}

// Every summary this program writes passes the checks: each fixture run and
// committed run, summarised and written as summary.json and as a baseline,
// reads back.
func TestWrittenSummariesRead(t *testing.T) {
	var dirs []string
	for _, root := range []string{"testdata", filepath.Join("..", "results")} {
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "trials.jsonl" {
				dirs = append(dirs, filepath.Dir(p))
			}
			return err
		}))
	}
	require.NotEmpty(t, dirs)
	out := t.TempDir()
	for i, dir := range dirs {
		run, err := store.ReadRun(dir)
		require.NoError(t, err, dir)
		if run.Manifest.IsRehearsal() {
			continue
		}
		for _, kind := range []string{KindSummary, KindBaseline} {
			s := Build(run, nil)
			s.Kind = kind
			var buf bytes.Buffer
			require.NoError(t, WriteJSON(&buf, s))
			p := filepath.Join(out, fmt.Sprintf("%d-%s.json", i, kind))
			require.NoError(t, store.WriteFileAtomic(p, buf.Bytes()))
			_, err := ReadSummary(p)
			assert.NoError(t, err, "%s as a %s", dir, kind)
		}
	}
}

// Every summary.json committed under results/ reads (rehearsals are refused
// as before: they hold checks, not measurements).
func TestCommittedSummariesRead(t *testing.T) {
	var n int
	require.NoError(t, filepath.WalkDir(filepath.Join("..", "results"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "summary.json" {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var head struct{ Kind string }
		require.NoError(t, json.Unmarshal(b, &head), p)
		_, err = ReadSummary(p)
		if head.Kind == KindRehearsal {
			var se *SummaryError
			assert.False(t, errors.As(err, &se), "%s: %v", p, err)
			return nil
		}
		n++
		assert.NoError(t, err, p)
		return nil
	}))
	assert.Positive(t, n, "results/ holds summaries of measured runs")
}

func intp(n int) *int { return &n }

// The scale (workload.gpus, nodes, ranks, threads, world_of_one) is recorded
// in the comparable facts; they are not knobs, so an 8-GPU run and a 1-GPU
// copy of its study share every trial ID (read-only audit: compare accepted
// them and said "changed between runs: nothing recorded").
func TestComparableScale(t *testing.T) {
	run := readFixture(t, "runs/bert-grid")
	eight := Build(run, nil).Comparable
	require.NotNil(t, eight.GPUs)
	assert.Equal(t, 8, *eight.GPUs)
	require.NotNil(t, eight.WorldOfOne)
	assert.False(t, *eight.WorldOfOne)
	assert.Nil(t, eight.Nodes, "the fixture's manifest records no nodes: unknown")

	run.Manifest.Workload["gpus"] = 1
	one := Build(run, nil).Comparable
	assert.Equal(t, []string{"workload.gpus differs (OLD 8, NEW 1)"}, scaleDiffers(eight, one))
	assert.Empty(t, scaleUnknown(eight, one))
	assert.Empty(t, scaleDiffers(eight, eight))

	run.Manifest.Workload["gpus"] = 8
	run.Manifest.Workload["world_of_one"] = true
	woo := Build(run, nil).Comparable
	assert.Equal(t, []string{"workload.world_of_one differs (OLD false, NEW true)"}, scaleDiffers(eight, woo))

	full := Comparable{GPUs: intp(8), Nodes: intp(2), Ranks: intp(16), Threads: intp(4), WorldOfOne: new(bool)}
	other := Comparable{GPUs: intp(8), Nodes: intp(1), Ranks: intp(8), Threads: intp(0), WorldOfOne: new(bool)}
	assert.Equal(t, []string{
		"workload.nodes differs (OLD 2, NEW 1)", "workload.ranks differs (OLD 16, NEW 8)", "workload.threads differs (OLD 4, NEW 0)",
	}, scaleDiffers(full, other))

	// Not recorded on either side: comparable, nothing to say. On one side:
	// a warning, not a refusal, so that older baselines stay usable.
	var none Comparable
	assert.Empty(t, scaleDiffers(none, none))
	assert.Empty(t, scaleUnknown(none, none))
	assert.Empty(t, scaleDiffers(none, full))
	warn := scaleUnknown(none, Comparable{GPUs: intp(8)})
	require.Len(t, warn, 1)
	assert.Contains(t, warn[0], "OLD does not record workload.gpus (NEW: 8)")
	warn = scaleUnknown(Comparable{Ranks: intp(8)}, none)
	require.Len(t, warn, 1)
	assert.Contains(t, warn[0], "NEW does not record workload.ranks (OLD: 8)")
}

// A file written before the scale was recorded reads: its provenance.workload
// supplies the facts when it holds them, else they stay unknown.
func TestReadSummaryScaleOfOlderFiles(t *testing.T) {
	dir := t.TempDir()
	m := baselineJSON(t, "runs/bert-grid")
	c := m["comparable"].(map[string]any)
	delete(c, "gpus")
	delete(c, "world_of_one")
	s, err := ReadSummary(writeJSONFile(t, dir, "older.json", m))
	require.NoError(t, err)
	require.NotNil(t, s.Comparable.GPUs, "from provenance.workload")
	assert.Equal(t, 8, *s.Comparable.GPUs)
	require.NotNil(t, s.Comparable.WorldOfOne)
	assert.False(t, *s.Comparable.WorldOfOne)

	delete(m["provenance"].(map[string]any), "workload")
	s, err = ReadSummary(writeJSONFile(t, dir, "oldest.json", m))
	require.NoError(t, err)
	assert.Nil(t, s.Comparable.GPUs)
	assert.Nil(t, s.Comparable.WorldOfOne)
	cur := Build(readFixture(t, "runs/bert-grid"), nil)
	assert.Empty(t, scaleDiffers(s.Comparable, cur.Comparable))
	assert.Len(t, scaleUnknown(s.Comparable, cur.Comparable), 2, "workload.gpus and world_of_one")

	// and a summary written now round-trips its scale
	m = baselineJSON(t, "runs/bert-grid")
	m["comparable"].(map[string]any)["gpus"] = 1 // a 1-GPU copy, provenance aside
	s, err = ReadSummary(writeJSONFile(t, dir, "one.json", m))
	require.NoError(t, err)
	assert.Equal(t, []string{"workload.gpus differs (OLD 1, NEW 8)"}, scaleDiffers(s.Comparable, cur.Comparable))
}
