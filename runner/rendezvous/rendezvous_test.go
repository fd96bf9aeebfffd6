package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

func listen(t *testing.T, ranks int) (*Server, *[]string) {
	t.Helper()
	welcomes := make([]Welcome, ranks)
	for i := range welcomes {
		welcomes[i] = Welcome{Config: engine.Config{Dist: engine.DistConfig{Rank: i, WorldSize: ranks}}, Steps: 3, Ranks: ranks}
	}
	var mu sync.Mutex
	var logged []string
	s, err := Listen("127.0.0.1:0", "secret", welcomes, func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, &logged
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestJoinKVBarrierStream(t *testing.T) {
	s, _ := listen(t, 2)
	var wg sync.WaitGroup
	got := make([]string, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, w, err := Dial(ctx(t), s.Addr(), "secret", r)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			assert.Equal(t, r, w.Config.Dist.Rank)
			if r == 0 {
				time.Sleep(50 * time.Millisecond) // rank 1 asks before rank 0 sets
				assert.NoError(t, c.Set(ctx(t), "nccl_id", "abcd"))
			}
			v, err := c.Get(ctx(t), "nccl_id")
			assert.NoError(t, err)
			got[r] = v
			assert.NoError(t, c.Barrier(ctx(t), "start"))
			assert.NoError(t, c.Heartbeat(0, nil))
			assert.NoError(t, c.Step(engine.StepMetrics{Step: 1, StepMS: 5}, false))
			assert.NoError(t, c.Done(ctx(t)))
		}()
	}
	wg.Wait()
	assert.Equal(t, []string{"abcd", "abcd"}, got)
	counts := map[string]int{}
	for len(s.Events()) > 0 {
		e := <-s.Events()
		counts[e.Msg.Type]++
		if e.Msg.Type == TypeStep {
			assert.Equal(t, 5.0, e.Msg.Metrics.StepMS)
		}
	}
	assert.Equal(t, map[string]int{TypeHello: 2, TypeBarrier: 2, TypeHeartbeat: 2, TypeStep: 2, TypeDone: 2}, counts)
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		token string
		rank  int
		why   string
	}{
		{"wrong token", "guess", 0, "wrong token"},
		{"no token", "", 0, "wrong token"},
		{"rank out of range", "secret", 5, "outside"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, logged := listen(t, 2)
			_, _, err := Dial(ctx(t), s.Addr(), tc.token, tc.rank)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrRefused), err)
			assert.Contains(t, err.Error(), tc.why)
			e := <-s.Events()
			assert.Equal(t, TypeRefused, e.Msg.Type)
			require.Len(t, *logged, 1)
			assert.Contains(t, (*logged)[0], tc.why)
		})
	}
}

func TestDuplicateRankRefusedAndLostReported(t *testing.T) {
	s, _ := listen(t, 2)
	c, _, err := Dial(ctx(t), s.Addr(), "secret", 1)
	require.NoError(t, err)
	_, _, err = Dial(ctx(t), s.Addr(), "secret", 1)
	assert.ErrorIs(t, err, ErrRefused)
	c.Close() // dies without done
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-s.Events():
			if e.Msg.Type == TypeLost {
				assert.Equal(t, 1, e.Msg.Rank)
				return
			}
		case <-deadline:
			t.Fatal("no lost event")
		}
	}
}

func TestClientSeesRunnerGone(t *testing.T) {
	s, _ := listen(t, 1)
	c, _, err := Dial(ctx(t), s.Addr(), "secret", 0)
	require.NoError(t, err)
	s.Close()
	select {
	case <-c.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("client did not notice the runner closing")
	}
	assert.ErrorIs(t, c.Barrier(ctx(t), "x"), ErrLost)
}
