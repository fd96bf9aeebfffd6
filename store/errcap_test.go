package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorTextIsCapped (audit N23, A-12): a huge error is cut to ErrorLimit
// when committed and when read (a file written by anything else), keeping
// valid UTF-8 and saying how much was cut.
func TestErrorTextIsCapped(t *testing.T) {
	w := newWriter(t)
	huge := strings.Repeat("é", 3<<20) // 6 MiB
	require.NoError(t, w.Append(&TrialRecord{ID: "t1", Outcome: Failed, Error: huge,
		Repeats: []RepeatRecord{{Outcome: Failed, Error: huge}}}))
	recs, err := ReadTrials(w.Dir + "/trials.jsonl")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	for _, e := range []string{recs[0].Error, recs[0].Repeats[0].Error} {
		assert.Less(t, len(e), ErrorLimit+100)
		assert.Contains(t, e, "more bytes: see the rank's log")
		assert.True(t, strings.HasPrefix(e, "éé"))
	}
}
