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
	"github.com/casestudy/casestudy/launch"
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

type devBackend struct{ device int }

func (b *devBackend) NCCLUniqueID() (string, error) { return "id", nil }
func (b *devBackend) CommProgress() (engine.CommProgress, error) {
	return engine.CommProgress{}, nil
}
func (b *devBackend) SetCommTimeout(ms int) (int, error) { return ms, nil }
func (b *devBackend) Create(cfg engine.Config) (Engine, error) {
	b.device = cfg.DeviceIndex
	return &fakeEngine{cfg: engine.Config{Dist: engine.DistConfig{Rank: cfg.Dist.Rank}}}, nil
}

// TestWorkerPicksDeviceFromLocalRank: started by srun with every GPU of its
// node visible, a rank's device is SLURM_LOCALID over the ranks per GPU, not
// the welcome's device_index; without SLURM_LOCALID it stops with a reason.
func TestWorkerPicksDeviceFromLocalRank(t *testing.T) {
	for _, tt := range []struct {
		local      string
		cvd        string
		perGPU     int
		want       int
		wantErrFor string
	}{
		{local: "3", perGPU: 1, want: 3},
		{local: "3", cvd: "0,1,2,3", perGPU: 2, want: 1},
		{local: "", perGPU: 1, wantErrFor: `$SLURM_LOCALID, which is ""`},
		{local: "1", cvd: "1", perGPU: 1, wantErrFor: "bound GPUs per task"},
	} {
		w := rendezvous.Welcome{Steps: 1, Ranks: 1, HeartbeatMS: 20, DevicePerLocalRank: tt.perGPU,
			Config: engine.Config{Device: "cuda", DeviceIndex: 0}}
		token := rendezvous.NewToken()
		srv, err := rendezvous.Listen("127.0.0.1:0", token, []rendezvous.Welcome{w}, nil)
		require.NoError(t, err)
		srv.Set(rendezvous.KeyGo, "1")
		env := map[string]string{rendezvous.EnvAddr: srv.Addr(), rendezvous.EnvToken: token, "SLURM_PROCID": "0", "SLURM_LOCALID": tt.local, "CUDA_VISIBLE_DEVICES": tt.cvd}
		b := &devBackend{device: -1}
		err = RunWorker(context.Background(), WorkerOptions{Getenv: func(k string) string { return env[k] },
			Open: func(string) (Backend, error) { return b, nil }, OnLost: func() {}})
		srv.Close()
		if tt.wantErrFor != "" {
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErrFor)
			assert.Equal(t, -1, b.device, "no engine without a device")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, b.device, "SLURM_LOCALID %s, %d ranks per GPU", tt.local, tt.perGPU)
	}
}

// TestWelcomesOnSlurm: a local launch gives each rank its one visible GPU
// as device 0; a Slurm step shows each rank every GPU of its node, so the
// welcome tells the worker to pick its device from its local rank.
func TestWelcomesOnSlurm(t *testing.T) {
	f := newFixture(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 2}\nbaseline: {procs_per_gpu: 1}\n")
	o := f.options()
	o.Machine = &Machine{Device: "cuda", GPUs: []string{"0", "1"}, EngineLib: "fake"}
	sp, err := buildSpec(o.Study, o.Plan.Trials[0], o.Machine)
	require.NoError(t, err)
	for _, tc := range []struct {
		launcher launch.Launcher
		want     int
	}{{launch.Local{}, 0}, {&launch.Slurm{}, 1}} {
		o.Launcher = tc.launcher
		r, err := New(o)
		require.NoError(t, err)
		ws, err := r.welcomes(sp, 0)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		for _, w := range ws {
			assert.Equal(t, 0, w.Config.DeviceIndex)
			assert.Equal(t, tc.want, w.DevicePerLocalRank, "%T", tc.launcher)
		}
	}
}
