package launch

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Local starts ranks as child processes of this one, each in its own session
// and so its own process group (a terminal's Ctrl-C reaches only the runner,
// and a kill reaches everything a rank started). Its own session is also its
// own scheduling group where the kernel groups by session
// (sched_autogroup_enabled): without it the N ranks of a run shared one
// group's CPU time on a busy host, and each rank computed up to N times slower
// than a one-rank run of the same work (docs/predict.md). Children get SIGKILL if the runner dies
// (Pdeathsig), and workers also exit when the rendezvous connection drops.
type Local struct{}

type localGroup struct {
	exits chan Exit
	mu    sync.Mutex
	procs map[int]*exec.Cmd // ranks still running
	kill  sync.Once
}

// Start starts every rank; if one cannot start, the started ones are killed
// and the error is returned (an infrastructure failure).
func (Local) Start(ctx context.Context, spec Spec) (Group, error) {
	g := &localGroup{exits: make(chan Exit, len(spec.Ranks)), procs: map[int]*exec.Cmd{}}
	var wg sync.WaitGroup
	for _, r := range spec.Ranks {
		cmd := exec.Command(spec.Path, spec.Args...)
		cmd.Env = r.Env
		cmd.Dir = spec.Dir
		cmd.Stdout, cmd.Stderr = r.Log, r.Log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := startOnSpawner(cmd); err != nil {
			g.signal(syscall.SIGKILL)
			go func() { wg.Wait(); close(g.exits) }()
			return nil, fmt.Errorf("starting rank %d of %s: %w", r.Rank, spec.Trial, err)
		}
		g.mu.Lock()
		g.procs[r.Rank] = cmd
		g.mu.Unlock()
		wg.Add(1)
		go func(rank int, cmd *exec.Cmd) {
			defer wg.Done()
			err := cmd.Wait()
			g.mu.Lock()
			delete(g.procs, rank) // no signal to a reaped pid's group after this
			g.mu.Unlock()
			g.exits <- exitOf(rank, cmd, err)
		}(r.Rank, cmd)
	}
	go func() { wg.Wait(); close(g.exits) }()
	return g, nil
}

// Pdeathsig fires when the thread that started the child exits, not the
// process. Go may retire threads, so every child is started from one goroutine
// locked to its thread for the life of the process.
var (
	spawnOnce sync.Once
	spawns    chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startOnSpawner(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for req := range spawns {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawns <- spawnRequest{cmd, done}
	return <-done
}

func exitOf(rank int, cmd *exec.Cmd, err error) Exit {
	e := Exit{Rank: rank, At: time.Now()}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		e.Code, e.Signal = -1, unix.SignalName(ws.Signal())
	case ok:
		e.Code = ws.ExitStatus()
	default:
		e.Code = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		e.Err = err
	}
	return e
}

func (g *localGroup) Exits() <-chan Exit { return g.exits }

func (g *localGroup) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cmd := range g.procs {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

func (g *localGroup) Kill(grace time.Duration) {
	g.kill.Do(func() {
		g.signal(syscall.SIGTERM)
		go func() {
			time.Sleep(grace)
			g.signal(syscall.SIGKILL)
		}()
	})
}
