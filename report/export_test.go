package report

import (
	"bytes"
	"encoding/csv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// The benchfmt export must read back with benchfmt.Reader: every launch a
// result, knobs as configuration, the objective and samples/s with their
// metadata.
func TestBenchfmtRoundTrip(t *testing.T) {
	for _, fixture := range []string{"runs/bert-grid", "runs/gpt-pipeline"} {
		t.Run(fixture, func(t *testing.T) {
			s := load(t, fixture)
			var buf bytes.Buffer
			n, err := WriteBenchfmt(&buf, s)
			require.NoError(t, err)
			assert.Equal(t, len(okTrials(s)), n)

			r := benchfmt.NewReader(&buf, "export.txt")
			perTrial := map[string][]float64{}
			for r.Scan() {
				switch rec := r.Result().(type) {
				case *benchfmt.SyntaxError:
					t.Fatalf("syntax error: %v", rec)
				case *benchfmt.Result:
					_, parts := rec.Name.Parts()
					require.Len(t, parts, 1)
					id := string(parts[0][len("/trial="):])
					tp, ok := rec.Value(UnitThroughput)
					require.True(t, ok)
					perTrial[id] = append(perTrial[id], tp)
					assert.Equal(t, s.Study, rec.GetConfig("study"))
					for _, tr := range s.Trials {
						if tr.ID == id {
							for k, v := range tr.Knobs {
								assert.Equal(t, v, rec.GetConfig(k), "knob %s of %s", k, id)
							}
							assert.Equal(t, "launch", rec.GetConfig("sample"))
						}
					}
				}
			}
			require.NoError(t, r.Err())
			assert.Equal(t, "higher", r.Units().Get(UnitThroughput, "better").Value)
			assert.Equal(t, benchmath.AssumeNothing, r.Units().GetAssumption(UnitThroughput))
			for _, tr := range okTrials(s) {
				assert.Equal(t, tr.Launches.SamplesPerS, perTrial[tr.ID], "launches of %s", tr.ID)
			}
		})
	}
}

func TestCSV(t *testing.T) {
	s := load(t, "runs/bert-grid")
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, s))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+len(s.Trials))
	head := rows[0]
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, r := range rows[1:] {
		require.Len(t, r, len(head))
	}
	assert.Equal(t, "oom", rows[3][col["outcome"]])
	assert.Equal(t, "", rows[3][col["samples_per_s"]])
	assert.Equal(t, "bf16", rows[6][col["precision"]])
	assert.NotEmpty(t, rows[6][col["value_lo"]])
	assert.Equal(t, "faster by more than 5%", rows[6][col["verdict"]])
	assert.Equal(t, "samples/s", rows[6][col["unit"]])
	assert.Contains(t, rows[3][col["error"]], "out of memory")
	assert.Equal(t, "precision=bf16, micro_batch=64", rows[6][col["label"]])
	assert.NotEmpty(t, rows[6][col["mfu_bf16"]])
}
