package console

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vbauerster/mpb/v8"

	"github.com/casestudy/casestudy/internal/syncbuf"
	"github.com/casestudy/casestudy/store"
)

var (
	start = &store.TrialRecord{ID: "abc", Knobs: map[string]string{"precision": "bf16"}, Changed: []string{"precision"}}
	done  = &store.TrialRecord{ID: "abc", Outcome: store.OK, Repeats: make([]store.RepeatRecord, 1), Summary: &store.TrialSummary{Metric: "tokens_per_s",
		Value: 1600.4, Unit: "tokens/s", Launches: 3, SamplesPerS: 12.5, StepMSMedian: 80, Noisy: true}}
	failed = &store.TrialRecord{ID: "def", Outcome: store.Crashed, Repeats: make([]store.RepeatRecord, 1), Error: "rank 1 was killed by SIGKILL\nmore"}
)

func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	p := NewProgress(&out, false)
	p.TrialStart(1, 2, start, 0, 3)
	p.TrialDone(done)
	p.Log("note")
	p.TrialDone(failed)
	p.Close()
	assert.Equal(t, "launch 1/2: trial abc [precision=bf16] repeat 1/3\n"+
		"trial abc done: ok 1600 tokens/s over 3 launches, step 80.00 ms (noisy)\n"+
		"note\n"+
		"trial def done: crashed: rank 1 was killed by SIGKILL\n", out.String())
	assert.False(t, IsTerminal(&out))
}

// screen replays what a terminal would show: mpb redraws its bar by moving
// the cursor up over the bar's lines and erasing to the end of the screen
// (ESC[nA ESC[J).
func screen(t *testing.T, raw string) []string {
	t.Helper()
	var lines []string
	cur := ""
	esc := regexp.MustCompile(`^\x1b\[(\d+)A\x1b\[J`)
	for i := 0; i < len(raw); {
		if m := esc.FindStringSubmatch(raw[i:]); m != nil {
			n, _ := strconv.Atoi(m[1])
			require.LessOrEqual(t, n, len(lines), "erases more lines than were written")
			lines = lines[:len(lines)-n]
			i += len(m[0])
			continue
		}
		require.NotEqual(t, byte('\x1b'), raw[i], "an escape other than cursor-up + erase at %q", raw[i:])
		if raw[i] == '\n' {
			lines = append(lines, cur)
			cur = ""
		} else {
			cur += string(raw[i])
		}
		i++
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// TestLiveKeepsResults: on a terminal the bar shows the launch, elapsed time,
// ETA and the trial in flight; the results printed above it are never erased,
// and the bar is gone after Close.
func TestLiveKeepsResults(t *testing.T) {
	var out syncbuf.Buffer
	l := newLive(&out, 0, mpb.ForceTTY(), mpb.WithWidth(200))
	var clockMu sync.Mutex
	clock := time.Unix(1000, 0)
	l.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	l.begin = clock
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	// mpb renders on its own goroutines: refresh until the display shows want
	shows := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			l.render()
			return strings.Contains(out.String(), want)
		}, 10*time.Second, time.Millisecond, "display never showed %q:\n%q", want, out.String())
	}

	l.TrialStart(1, 3, start, 0, 1)
	advance(10 * time.Second)
	shows("launch 1/3 [")
	shows("10s elapsed, ETA ?  trial abc [precision=bf16] repeat 1/1")

	l.TrialDone(done) // one launch of 10 s ended, two to go
	l.TrialStart(2, 3, failed, 0, 1)
	advance(4 * time.Second)
	shows("launch 2/3 [")
	shows("14s elapsed, ETA 16s  trial def [baseline] repeat 1/1")
	l.Log("a note")
	l.TrialDone(failed)
	l.Close() // prints what mpb still holds

	assert.Equal(t, []string{
		"trial abc done: ok 1600 tokens/s over 3 launches, step 80.00 ms (noisy)",
		"a note",
		"trial def done: crashed: rank 1 was killed by SIGKILL",
	}, screen(t, out.String()))
}

func TestETA(t *testing.T) {
	var e eta
	t0 := time.Unix(0, 0)
	e.start(1, 4, t0)
	_, ok := e.left(t0.Add(time.Minute))
	assert.False(t, ok, "unknown before a launch ended")
	e.start(2, 4, t0.Add(20*time.Second)) // launch 1 took 20 s
	d, ok := e.left(t0.Add(25 * time.Second))
	require.True(t, ok)
	assert.Equal(t, 55*time.Second, d, "3 launches of 20 s, 5 s of the current one gone")
	e.end(t0.Add(40 * time.Second))
	e.start(3, 3, t0.Add(40*time.Second)) // a failed trial skipped a repeat: 3 planned now
	d, _ = e.left(t0.Add(40 * time.Second))
	assert.Equal(t, 20*time.Second, d)
	d, _ = e.left(t0.Add(90 * time.Second))
	assert.Equal(t, time.Duration(0), d, "never negative")
	assert.Equal(t, "3m05s", Duration(185*time.Second))
	assert.Equal(t, "1h02m", Duration(62*time.Minute))
}

func TestLabels(t *testing.T) {
	assert.Equal(t, "abc [precision=bf16]", TrialLabel(start))
	assert.Equal(t, "oom", ResultText(&store.TrialRecord{Outcome: store.OOM}))
	assert.Equal(t, "ok 12.50 samples/s, step 80.00 ms", ResultText(&store.TrialRecord{Outcome: store.OK,
		Summary: &store.TrialSummary{SamplesPerS: 12.5, StepMSMedian: 80}}), "a record from before the summary had its value")
	assert.True(t, strings.HasSuffix(truncate(strings.Repeat("x", 200), 20), "..."))
}

// TestLiveCloseFlushes: lines printed just before Close are not lost.
func TestLiveCloseFlushes(t *testing.T) {
	for range 20 {
		var out syncbuf.Buffer
		l := newLive(&out, time.Hour, mpb.ForceTTY(), mpb.WithWidth(200))
		l.TrialStart(1, 1, start, 0, 1)
		l.TrialDone(done)
		l.Close()
		require.Equal(t, []string{"trial abc done: ok 1600 tokens/s over 3 launches, step 80.00 ms (noisy)"}, screen(t, out.String()))
	}
}
