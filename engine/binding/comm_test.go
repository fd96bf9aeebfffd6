package binding

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// The hang machinery on real Gloo ranks: the collective deadline
// (dist.timeout_ms, lowered while the ranks run by cs_set_comm_timeout), the
// stall fault and the communication progress a rank reports from another
// thread while its step is stuck (cs_comm_progress).

const (
	dpProgressEnv    = "CASESTUDY_DP_PROGRESS"     // "1": the child prints its progress as it changes
	dpCommTimeoutEnv = "CASESTUDY_DP_COMM_TIMEOUT" // ms: the child sets the deadline after its first step
	dpProgress       = "DPPROGRESS "               // prefix of a progress line (stderr)
)

// printProgress polls the library's progress from its own goroutine (as the
// runner's heartbeats do while the engine thread is inside a step) and prints
// each new state to stderr; the function it returns prints the last one and
// stops.
func printProgress(lib *Library) (stop func()) {
	if os.Getenv(dpProgressEnv) != "1" {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var last engine.CommProgress
	show := func() {
		p, err := lib.CommProgress()
		if err != nil {
			return
		}
		q := p
		q.PendingMS = 0 // only a change of state is news
		if q == last {
			return
		}
		last = q
		raw, _ := json.Marshal(p)
		fmt.Fprintln(os.Stderr, dpProgress+string(raw))
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				show()
				return
			case <-t.C:
				show()
			}
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-finished
		}
	}
}

// lowerCommTimeout sets the child's deadline after step 0 when the test asks.
func lowerCommTimeout(lib *Library, step int) error {
	v := os.Getenv(dpCommTimeoutEnv)
	if v == "" || step != 0 {
		return nil
	}
	ms, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	got, err := lib.SetCommTimeout(ms)
	if err == nil && got != ms {
		err = fmt.Errorf("cs_set_comm_timeout answered %d ms for %d", got, ms)
	}
	return err
}

// progressLines reads the progress lines a rank printed.
func progressLines(t *testing.T, text string) []engine.CommProgress {
	t.Helper()
	var out []engine.CommProgress
	for _, line := range strings.Split(text, "\n") {
		if raw, ok := strings.CutPrefix(line, dpProgress); ok {
			var p engine.CommProgress
			require.NoError(t, json.Unmarshal([]byte(raw), &p), raw)
			out = append(out, p)
		}
	}
	return out
}

// TestDPStallFault: rank 1 stalls 5 s before its first bucket of step 2; the
// deadline, lowered to 1.5 s after step 0, fails rank 0's collective long
// before the stall ends (a communication error, not a hang), and the progress
// both ranks reported while stuck shows rank 1 behind: it had not issued the
// bucket rank 0 waited in.
func TestDPStallFault(t *testing.T) {
	lib := glooLibrary(t)
	cfg := dpGPT()
	cfg.Fault = engine.FaultConfig{Kind: "stall", Rank: 1, AtStep: 2, SlowMS: 5000}
	start := time.Now()
	_, errs := startRanks(t, lib, cfg, 2, 4, rankOpts{deadline: 60 * time.Second,
		env: []string{dpProgressEnv + "=1", dpCommTimeoutEnv + "=1500"}})
	require.Len(t, errs, 2)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	t.Logf("after %v:\nrank 0: %s\nrank 1: %s", time.Since(start), tail(errs[0].Error()), tail(errs[1].Error()))
	assert.Contains(t, errs[0].Error(), "step 2: engine cs_step: communication error")
	assert.Contains(t, errs[0].Error(), "dist.timeout_ms=1500")

	p0, p1 := progressLines(t, errs[0].Error()), progressLines(t, errs[1].Error())
	require.NotEmpty(t, p0)
	require.NotEmpty(t, p1)
	last0 := p0[len(p0)-1]
	assert.True(t, last0.Failed, "rank 0 recorded the failure: %+v", last0)
	assert.Equal(t, int64(2), last0.Step)
	assert.Equal(t, 1500, last0.DeadlineMS)
	// Rank 1 while stalled: in step 2 with no bucket launched yet; rank 0
	// launched bucket 0 of step 2 and issued more collectives than rank 1 had.
	var stalled *engine.CommProgress
	for i := range p1 {
		if p1[i].Step == 2 && p1[i].Bucket == -1 {
			stalled = &p1[i]
			break
		}
	}
	require.NotNil(t, stalled, "rank 1's progress while stalled: %+v", p1)
	var waiting *engine.CommProgress
	for i := range p0 {
		if p0[i].Step == 2 && p0[i].Bucket >= 0 && p0[i].Outstanding() > 0 {
			waiting = &p0[i]
			break
		}
	}
	require.NotNil(t, waiting, "rank 0's progress while it waited: %+v", p0)
	assert.Greater(t, waiting.Issued, stalled.Issued, "rank 0 issued bucket 0, rank 1 had not")
	assert.Equal(t, stalled.Issued, stalled.Completed, "rank 1 had nothing outstanding: it is behind, not stuck in a collective")
}
