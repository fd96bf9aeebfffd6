package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/checklist"
)

var sampleFindings = []checklist.Result{
	{RuleID: "precision.bf16", Title: "Use bf16 autocast on Hopper", Chapter: 30, Severity: checklist.Warning,
		Status: checklist.Finding, Message: "fp32 trials reach 1000 samples/s, bf16 1620 <b>(1.62×)</b>",
		Evidence: []string{"t-1 median 1000 samples/s"}, Trials: []string{"t-1"}, Recommendation: "set precision: bf16"},
	{RuleID: "noise.cv", Title: "Measurements are stable", Severity: checklist.Info, Status: checklist.Pass},
}

// goldenCase renders one fixture in one format and compares it with
// testdata/golden/<fixture>.<ext> (rewritten with -update).
func TestGolden(t *testing.T) {
	tests := []struct {
		fixture  string
		findings []checklist.Result
	}{
		{"runs/bert-grid", sampleFindings},
		{"runs/gpt-pipeline", nil},
		{"runs/all-failed", nil},
		{"runs/gpt-oat", nil},
		{"runs/gpt-greedy", nil},
	}
	for _, tt := range tests {
		for _, format := range []string{"md", "json"} {
			name := filepath.Base(tt.fixture) + "." + format
			t.Run(name, func(t *testing.T) {
				s := Build(readFixture(t, tt.fixture), tt.findings)
				var buf bytes.Buffer
				require.NoError(t, Render(&buf, s, format))
				golden := filepath.Join("testdata", "golden", name)
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
					require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "run go test ./report -update")
				if d := firstDiff(string(want), buf.String()); d != "" {
					t.Errorf("%s differs (review, then go test ./report -update):\n%s", golden, d)
				}
			})
		}
	}
}

func TestWriteAllFormats(t *testing.T) {
	out := t.TempDir()
	paths, err := Write(readFixture(t, "runs/bert-grid"), sampleFindings, out, nil)
	require.NoError(t, err)
	require.Len(t, paths, 4, "three formats and the suggested confirmation study")
	assert.Equal(t, filepath.Join(out, ConfirmFile), paths[0])
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	require.NoError(t, err)
	h := string(html)
	assert.NotContains(t, h, "<script>alert(1)</script>", "text from the run must be escaped")
	assert.Contains(t, h, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.NotContains(t, h, "<b>(1.62×)</b>")
	for _, banned := range []string{"http://", "https://", "src=", "@import", "url("} {
		for _, line := range strings.Split(h, "\n") {
			if strings.Contains(line, banned) && !strings.Contains(line, "xmlns") {
				t.Errorf("report.html must not fetch anything, found %q in %q", banned, line)
			}
		}
	}
	assert.Equal(t, 5, strings.Count(h, `<figure id="fig-`), "a grid over two knobs: one heatmap; every launch, breakdown, MFU, memory")
	assert.Equal(t, 5+30, strings.Count(h, "<svg"), "and a step-time chart for each of the 30 launches (5 trials × 6; no GPU samples in this fixture)")
	s, err := ReadSummary(filepath.Join(out, "summary.json"))
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, s.Schema)
}

func TestOnlyFailedTrials(t *testing.T) {
	out := t.TempDir()
	_, err := Write(readFixture(t, "runs/all-failed"), nil, out, []string{"html", "md"})
	require.NoError(t, err)
	html, _ := os.ReadFile(filepath.Join(out, "report.html"))
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	assert.Contains(t, string(html), "No trial finished")
	assert.Contains(t, string(md), "No trial finished")
	assert.Contains(t, string(md), "SIGSEGV")
	assert.NotContains(t, string(html), "<svg")
}

// firstDiff describes the first line where got differs from want ("" if equal).
func firstDiff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return "lengths differ"
}
