package runner

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/runner/rendezvous"
)

// TestWorkerWithWrongTokenIsRefused: a worker that presents another trial's
// token does not get in, and the runner logs the refusal.
func TestWorkerWithWrongTokenIsRefused(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	srv, err := rendezvous.Listen("127.0.0.1:0", rendezvous.NewToken(), []rendezvous.Welcome{{Steps: 1, Ranks: 1}},
		func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() })
	require.NoError(t, err)
	defer srv.Close()
	env := map[string]string{rendezvous.EnvAddr: srv.Addr(), rendezvous.EnvToken: "stale-token", rendezvous.EnvRank: "0"}
	opened := false
	err = RunWorker(context.Background(), WorkerOptions{Getenv: func(k string) string { return env[k] },
		Open: func(string) (Backend, error) { opened = true; return fakeBackend{}, nil }})
	require.ErrorIs(t, err, rendezvous.ErrRefused)
	assert.False(t, opened, "a refused worker never touches the engine")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, logged, 1)
	assert.Contains(t, logged[0], "wrong token")
}

func TestWorkerStartedByHand(t *testing.T) {
	err := RunWorker(context.Background(), WorkerOptions{Getenv: func(string) string { return "" }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "started by casestudy run")
}

// TestWorkerExchangesTheNCCLID: rank 0 of an NCCL world publishes the unique
// id and every rank creates its engine with it.
func TestWorkerExchangesTheNCCLID(t *testing.T) {
	const n = 3
	welcomes := make([]rendezvous.Welcome, n)
	for r := range welcomes {
		welcomes[r] = rendezvous.Welcome{Steps: 2, Ranks: n, HeartbeatMS: 20,
			Config: engine.Config{Dist: engine.DistConfig{Rank: r, WorldSize: n, Backend: "nccl"}}}
	}
	token := rendezvous.NewToken()
	srv, err := rendezvous.Listen("127.0.0.1:0", token, welcomes, nil)
	require.NoError(t, err)
	defer srv.Close()
	srv.Set(rendezvous.KeyGo, "1") // the GPU is free: no launch before this one
	ids := make([]string, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := map[string]string{rendezvous.EnvAddr: srv.Addr(), rendezvous.EnvToken: token, rendezvous.EnvRank: strconv.Itoa(r)}
			b := &idBackend{}
			err := RunWorker(context.Background(), WorkerOptions{Getenv: func(k string) string { return env[k] },
				Open: func(string) (Backend, error) { return b, nil }, OnLost: func() {}})
			assert.NoError(t, err)
			ids[r] = b.got
		}()
	}
	wg.Wait()
	assert.Equal(t, []string{"id-from-rank0", "id-from-rank0", "id-from-rank0"}, ids)
	done := 0
	timeout := time.After(5 * time.Second)
	for done < n {
		select {
		case ev := <-srv.Events():
			if ev.Msg.Type == rendezvous.TypeDone {
				done++
			}
		case <-timeout:
			t.Fatal("not every rank reported done")
		}
	}
}

type idBackend struct{ got string }

func (b *idBackend) NCCLUniqueID() (string, error) { return "id-from-rank0", nil }

func (b *idBackend) CommProgress() (engine.CommProgress, error) { return engine.CommProgress{}, nil }

func (b *idBackend) SetCommTimeout(ms int) (int, error) { return ms, nil }
func (b *idBackend) Create(cfg engine.Config) (Engine, error) {
	b.got = cfg.Dist.NCCLID
	return &fakeEngine{cfg: engine.Config{Dist: engine.DistConfig{Rank: cfg.Dist.Rank}}}, nil
}
