package report

import (
	"bytes"
	"encoding/csv"
	htmlpkg "html"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/casestudy/casestudy/store"
)

// TestDroppedListedOnce: the combinations a run dropped (in the manifest and,
// as the runner commits them, as skipped records) are listed once with their
// reason and are no trial anywhere: the counts agree in the summary, the
// Markdown and HTML reports, the CSV and benchfmt exports, compare and
// history.
func TestDroppedListedOnce(t *testing.T) {
	run := readFixture(t, "runs/gpt-oat")
	skipped := 0
	for _, rec := range run.Trials {
		if rec.Outcome == store.Skipped {
			skipped++
		}
	}
	require.Equal(t, 2, skipped, "the fixture has the runner's skipped records")
	require.Len(t, run.Manifest.Dropped, 2, "and the manifest's list of the same combinations")

	s := Build(run, nil)
	const trials = 8
	require.Len(t, s.Trials, trials)
	n := 0
	for _, c := range s.Counts {
		n += c
	}
	assert.Equal(t, trials, n, "counts")
	assert.Equal(t, map[string]int{"ok": 7, "oom": 1}, s.Counts)
	require.Len(t, s.Dropped, 2, "each dropped combination once")
	for _, tr := range s.Trials {
		assert.NotEqual(t, store.Skipped, tr.Outcome, "a dropped combination shown as trial %s", tr.ID)
	}

	var md, html, csvOut, bench bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, s))
	require.NoError(t, WriteHTML(&html, s))
	require.NoError(t, WriteCSV(&csvOut, s))
	nb, err := WriteBenchfmt(&bench, s)
	require.NoError(t, err)
	assert.Contains(t, md.String(), "Trials: 7 ok, 1 oom · 2 combination(s) dropped before running")
	for _, d := range s.Dropped {
		assert.Equal(t, 1, strings.Count(md.String(), d.Reason[:30]), "report.md lists %q once", d.Reason)
		assert.Equal(t, 1, strings.Count(html.String(), htmlpkg.EscapeString(d.Reason[:30])), "report.html lists %q once", d.Reason)
	}
	assert.Equal(t, trials, strings.Count(html.String(), "<tr data-outcome="), "HTML trials table rows")
	rows, err := csv.NewReader(&csvOut).ReadAll()
	require.NoError(t, err)
	assert.Len(t, rows, 1+trials, "CSV rows")
	assert.Equal(t, 7, nb, "benchfmt: the ok trials")

	c, err := Compare(s, s, "a", "b", 0.05)
	require.NoError(t, err)
	assert.Len(t, c.Rows, trials, "compare rows")
	assert.Empty(t, c.OnlyOld)
	assert.Empty(t, c.OnlyNew)

	dir := t.TempDir()
	for i, id := range []string{"20261130T050000Z-ffffff", "20261201T050000Z-ffffff"} {
		r := readFixture(t, "runs/gpt-oat")
		r.Manifest.RunID = id
		r.Manifest.Created = r.Manifest.Created.AddDate(0, 0, i)
		writeRun(t, filepath.Join(dir, id), r)
	}
	h, err := LoadHistory(dir)
	require.NoError(t, err)
	assert.Len(t, h.Trials, trials, "history rows")
}

// TestMarkdownRenders: the golden report.md files render (GitHub-flavoured
// Markdown, goldmark) to what they say: no HTML from the run gets through,
// and nothing is escaped twice (">=" reads ">=", not "&gt;=").
func TestMarkdownRenders(t *testing.T) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, md.Convert(src, &out))
		h := out.String()
		assert.NotContains(t, h, "<script", f)
		assert.NotContains(t, h, "&amp;lt;", "%s: escaped twice", f)
		assert.NotContains(t, h, "&amp;gt;", "%s: escaped twice", f)
		assert.NotContains(t, string(src), "&gt;", "%s: raw Markdown with HTML entities", f)
		assert.NotContains(t, h, "\x1b", f)
	}
	var b strings.Builder
	mdRow(&b, []string{"need >= 6 samples", "a <= b", "<b>bold</b>", "x | y", "~ and ~"})
	var out bytes.Buffer
	require.NoError(t, md.Convert([]byte("| a | b | c | d | e |\n|---|---|---|---|---|\n"+b.String()), &out))
	for _, want := range []string{"<td>need &gt;= 6 samples</td>", "<td>a &lt;= b</td>", "<td>&lt;b&gt;bold&lt;/b&gt;</td>", "<td>x | y</td>", "<td>~ and ~</td>"} {
		assert.Contains(t, out.String(), want)
	}
	assert.Contains(t, b.String(), "| need >= 6 samples | a <= b |", "raw Markdown stays readable")
}

// TestProvenanceRendering: cuDNN in its dotted form, the topology matrix
// without terminal escapes.
func TestProvenanceRendering(t *testing.T) {
	run := readFixture(t, "runs/gpt-oat")
	require.Contains(t, run.Manifest.Host.TopoMatrix, "\x1b[4m", "the fixture's matrix has escapes")
	s := Build(run, nil)
	assert.Equal(t, "9.19.0", s.Provenance.CuDNN)
	var md, html bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, s))
	require.NoError(t, WriteHTML(&html, s))
	assert.Contains(t, md.String(), "cuDNN 9.19.0")
	assert.NotContains(t, html.String(), "\x1b")
	assert.Contains(t, html.String(), "\tGPU0\tGPU1\tCPU Affinity\nGPU0")
}

func TestKnobAxis(t *testing.T) {
	tests := []struct {
		vals, listed []string
		order        []string
		numeric, log bool
	}{
		{[]string{"8", "4", "32", "16"}, nil, []string{"4", "8", "16", "32"}, true, true},
		{[]string{"25", "50", "100"}, nil, []string{"25", "50", "100"}, true, false},
		{[]string{"1", "64"}, nil, []string{"1", "64"}, true, true},
		{[]string{"0", "1", "2"}, nil, []string{"0", "1", "2"}, true, false},
		{[]string{"bf16", "fp32", "tf32"}, []string{"fp32", "tf32", "bf16", "fp16"}, []string{"fp32", "tf32", "bf16"}, false, false},
		{[]string{"true", "false"}, nil, []string{"true", "false"}, false, false},
	}
	for _, tt := range tests {
		ax := newKnobAxis("k", tt.vals, tt.listed)
		assert.Equal(t, tt.order, ax.values, "%v", tt.vals)
		assert.Equal(t, tt.numeric, ax.numeric, "%v numeric", tt.vals)
		assert.Equal(t, tt.log, ax.log, "%v log", tt.vals)
		if ax.numeric {
			for _, v := range tt.vals {
				f, _ := strconv.ParseFloat(v, 64)
				assert.Equal(t, f, ax.pos[v], "%s at its value", v)
			}
		}
	}
}

func TestGreedyPath(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-greedy"), nil)
	require.Equal(t, StrategyGreedy, s.Strategy)
	require.Len(t, s.Trials, 4, "trials of later rounds count although only round 1 is in the plan")
	rounds := greedyPath(s, objectiveMeasure(s))
	require.Len(t, rounds, 3)
	var kept []string
	for _, r := range rounds {
		kept = append(kept, r.knob+": "+r.chosen.Label)
	}
	assert.Equal(t, []string{": baseline", "micro_batch: micro_batch=32", "graphs: micro_batch=32, graphs=true"}, kept)
	assert.Len(t, rounds[1].candidates, 3)
	assert.Len(t, rounds[2].candidates, 2)
}

func TestStrategy(t *testing.T) {
	for fixture, want := range map[string]string{"runs/gpt-oat": StrategyOneAtATime, "runs/bert-grid": StrategyGrid, "runs/gpt-greedy": StrategyGreedy} {
		assert.Equal(t, want, Build(readFixture(t, fixture), nil).Strategy, fixture)
	}
	// A study that inherits its sweep has no strategy in its text: read off the trials.
	assert.Equal(t, StrategyOneAtATime, sweepStrategy("extends: base.yaml\n", []Trial{{Changed: []string{"a"}}, {Changed: nil}}))
	assert.Equal(t, StrategyList, sweepStrategy("", []Trial{{Changed: []string{"a", "b"}}}))
}

// TestMFUOnePeak: every trial's MFU is against the H200's dense bf16 peak,
// so it ranks like achieved TFLOP/s; the engine's per-precision MFU ranks
// fp32 first although it is the slowest.
func TestMFUOnePeak(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-oat"), nil)
	require.NotNil(t, s.MFUPeak)
	assert.Equal(t, 989.4, s.MFUPeak.TFLOPS)
	assert.Equal(t, "NVIDIA H200", s.MFUPeak.Device)
	var fp32, bf16 *Trial
	for i := range s.Trials {
		tr := &s.Trials[i]
		if tr.OK() {
			assert.InDelta(t, tr.TFLOPS/989.4, tr.MFUBF16, 1e-12, tr.Label)
		}
		switch tr.Label {
		case "precision=fp32":
			fp32 = tr
		case "baseline":
			bf16 = tr
		}
	}
	require.NotNil(t, fp32)
	require.NotNil(t, bf16)
	assert.Greater(t, fp32.MFU, bf16.MFU, "the engine's MFU: fp32 against its own, lower peak")
	assert.Less(t, fp32.MFUBF16, bf16.MFUBF16, "against one peak fp32 is below bf16, as its throughput is")
	assert.Nil(t, Build(readFixture(t, "runs/all-failed"), nil).MFUPeak, "no ok trial: no MFU")
}

// TestBreakdownPerSample: each trial's stacked bar is its time per sample,
// 1 / throughput, whatever its micro-batch.
func TestBreakdownPerSample(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-oat"), nil)
	c, err := breakdownChart(s, okTrials(s))
	require.NoError(t, err)
	require.NotNil(t, c)
	parts := regexp.MustCompile(`data-trial="([^"]+)" data-label="[^"]*" data-part="[^"]+" data-value="([^"]+)"`).FindAllStringSubmatch(string(c.SVG), -1)
	sum := map[string]float64{}
	for _, p := range parts {
		v, err := strconv.ParseFloat(p[2], 64)
		require.NoError(t, err)
		sum[p[1]] += v
	}
	require.Len(t, sum, 7)
	for _, tr := range okTrials(s) {
		assert.InDelta(t, 1000/tr.Throughput.Center, sum[tr.ID], 1e-9*sum[tr.ID]+1e-12, "%s: ms per sample", tr.Label)
	}
	assert.Contains(t, string(c.SVG), "ms per sample")
}

func TestLabels(t *testing.T) {
	s := Build(readFixture(t, "runs/bert-grid"), nil)
	var labels []string
	for _, tr := range s.Trials {
		labels = append(labels, tr.Label)
	}
	assert.Equal(t, []string{"baseline", "micro_batch=32", "micro_batch=64", "precision=bf16", "precision=bf16, micro_batch=32",
		"precision=bf16, micro_batch=64", "precision=fp16"}, labels, "the swept knobs in the sweep's order")
	charts, err := Charts(s)
	require.NoError(t, err)
	for _, c := range charts {
		for _, label := range regexp.MustCompile(`data-label="([^"]*)"`).FindAllStringSubmatch(string(c.SVG), -1) {
			assert.NotRegexp(t, `^t-[0-9a-f]{8}$`, label[1], "chart %s labels a mark by its hash", c.ID)
		}
	}
}

// TestGridSmallMultiples: a grid over three knobs gets one heatmap of the
// first two per value of the third, each with its own cells.
func TestGridSmallMultiples(t *testing.T) {
	s := Build(readFixture(t, "runs/bert-grid"), nil)
	n := len(s.Trials)
	for i := 0; i < n; i++ {
		tr := s.Trials[i]
		tr.Knobs = maps.Clone(tr.Knobs)
		tr.Knobs["ddp.bucket_mb"] = "100"
		tr.ID, tr.Baseline, tr.Best = tr.ID+"-100", false, false
		tr.Changed = append(slices.Clone(tr.Changed), "ddp.bucket_mb")
		s.Trials = append(s.Trials, tr)
	}
	s.SweptKnobs = append(s.SweptKnobs, "ddp.bucket_mb")
	setLabels(s)
	charts, err := gridCharts(s, objectiveMeasure(s))
	require.NoError(t, err)
	require.Len(t, charts, 2)
	for i, bucket := range []string{"25", "100"} {
		assert.Contains(t, charts[i].Title, "(ddp.bucket_mb="+bucket+")")
		cells := regexp.MustCompile(`class="mark cell[^"]*"`).FindAllString(string(charts[i].SVG), -1)
		want := n
		if bucket == "25" {
			want++ // the dropped combination has ddp.bucket_mb=25
		}
		assert.Len(t, cells, want, "cells of panel ddp.bucket_mb=%s", bucket)
	}
}

// TestListChart: a list sweep draws every trial on its own row.
func TestListChart(t *testing.T) {
	s := Build(readFixture(t, "runs/bert-grid"), nil)
	s.Strategy = StrategyList
	charts, err := Charts(s)
	require.NoError(t, err)
	require.NotEmpty(t, charts)
	require.Equal(t, "trials", charts[0].ID)
	svg := string(charts[0].SVG)
	assert.Equal(t, len(okTrials(s)), strings.Count(svg, `class="mark point`))
	assert.Equal(t, len(notOKTrials(s)), strings.Count(svg, `class="mark miss"`))
}

// TestVerdictsOnCharts: every point of a per-knob chart but the baseline's
// carries its verdict against the baseline (its colour), from the statistics.
func TestVerdictsOnCharts(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-oat"), nil)
	charts, err := knobCharts(s, objectiveMeasure(s))
	require.NoError(t, err)
	want := map[string]string{}
	for _, tr := range s.Trials {
		if tr.VsBaseline != nil {
			want[tr.ID] = versusBaseline(&tr).Verdict
		}
	}
	require.Equal(t, "better", want[fixID(gptKnobs("bf16", "32", "false"))], "micro_batch=32 is faster in the fixture")
	require.Equal(t, "worse", want[fixID(gptKnobs("fp32", "8", "false"))], "fp32 is slower")
	n := 0
	for _, c := range charts {
		for _, m := range regexp.MustCompile(`class="mark point" data-trial="([^"]+)"[^>]* data-verdict="([^"]*)"`).FindAllStringSubmatch(string(c.SVG), -1) {
			assert.Equal(t, want[m[1]], m[2], "verdict of %s on chart %s", m[1], c.ID)
			assert.Contains(t, string(c.SVG), hexColor(verdictColours[m[2]]))
			n++
		}
	}
	assert.Equal(t, 6, n, "the six trials that change one knob and finished")
}
