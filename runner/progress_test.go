package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/store"
)

func TestProgress(t *testing.T) {
	rec := &store.TrialRecord{ID: "abc", Knobs: map[string]string{"precision": "bf16"}, Changed: []string{"precision"}}
	done := &store.TrialRecord{ID: "abc", Outcome: store.OK, Summary: &store.TrialSummary{Metric: "tokens_per_s",
		Value: 1600.4, Unit: "tokens/s", Launches: 3, SamplesPerS: 12.5, StepMSMedian: 80, Noisy: true}}
	failed := &store.TrialRecord{ID: "def", Outcome: store.Crashed, Error: "rank 1 was killed by SIGKILL\nmore"}

	var plain bytes.Buffer
	p := NewProgress(&plain, false)
	p.TrialStart(1, 2, rec, 0, 3)
	p.TrialDone(done)
	p.Log("note")
	p.TrialDone(failed)
	p.Close()
	assert.Equal(t, "launch 1/2: trial abc [precision=bf16] repeat 1/3\n"+
		"trial abc done: ok 1600 tokens/s over 3 launches (noisy)\n"+
		"note\n"+
		"trial def done: crashed: rank 1 was killed by SIGKILL\n", plain.String())
	assert.False(t, IsTerminal(&plain))

	var tty bytes.Buffer
	p = NewProgress(&tty, true)
	p.TrialStart(1, 2, rec, 0, 1)
	p.TrialDone(done)
	p.TrialStart(2, 2, rec, 0, 1)
	p.Close()
	out := tty.String()
	assert.NotContains(t, strings.TrimSuffix(out, "\r\033[K"), "\n", "one updating line")
	assert.Contains(t, out, "[....................] 1/2 ETA ?")
	assert.Contains(t, out, "[##########..........] 2/2 ETA")
	assert.Contains(t, out, "last: abc ok 1600 tokens/s over 3 launches")
}
