package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// A signal from outside is an interruption, never a trial's failure, and an
// infrastructure fault stops the sweep: --resume runs again what either cut.
//
// Preemption (systemd's stop, scancel, a CI cancellation) signals the runner
// and its ranks at once; a rank reports its signal before it dies, often
// before the runner's own stop is seen. Such a cause waits stopWait for the
// runner's stop, or the scheduler's word that the allocation is ending, and
// becomes an interruption when either comes. A stop signal to one rank alone
// stays that rank's crash.

// stopWait is how long a launch whose rank received a stop signal from
// outside waits for the runner's own stop before the rank is blamed.
var stopWait = 2 * time.Second

// isStopSignal says whether a signal is one that stops a job from outside.
func isStopSignal(name string) bool {
	return name == "SIGTERM" || name == "SIGINT" || name == "SIGHUP"
}

// StatusEnvironment is the error status of a rank whose environment failed
// (the engine library cannot be loaded: replaced or removed mid-run): a fault
// of the machine, not of the trial.
const StatusEnvironment = "environment"

// haltError is an environment fault that stopped the sweep; the trial it cut
// is recorded interrupted and --resume runs it again.
type haltError struct{ err error }

func (e *haltError) Error() string {
	return "the sweep stopped on an environment fault: " + e.err.Error()
}
func (e *haltError) Unwrap() error { return e.err }

// stopEnvironment stops the sweep after an environment fault that cut p:
// p is recorded interrupted (resume runs it again) and the run ends with exit
// status 3.
func (r *Runner) stopEnvironment(p *pending, err error) {
	p.rec.Outcome = store.Interrupted
	p.rec.Error = fmt.Sprintf("%v; the sweep stopped: --resume runs it again", err)
	r.logf("trial %s: %v: the sweep stops; fix the environment and resume", p.rec.ID, err)
	if r.halt != nil {
		r.halt(&haltError{err})
	}
}

// ended turns what stopped the sweep into Run's error: an environment fault
// (exit status 3) rather than ErrInterrupted when one halted it.
func ended(ctx context.Context, err error) error {
	var h *haltError
	if errors.Is(err, ErrInterrupted) && errors.As(context.Cause(ctx), &h) {
		return exitcode.With(exitcode.Environment, h)
	}
	return err
}

// settle reclassifies a launch whose cause is a stop signal from outside (a
// rank reported it, or ended by it by itself) once every rank ended: an
// interruption when the runner is stopped too within stopWait, or the
// scheduler says the allocation is ending; the rank's crash otherwise. A
// step the scheduler could not start in an allocation that is ending is an
// interruption too.
func (w *watcher) settle(ctx context.Context) {
	c := w.first
	if c != nil && c.scheduler && c.outcome == store.Failed { // Slurm cancelled the step, or could not start it: is the job gone?
		why := w.allocationEnded()
		if why == "" && strings.Contains(c.msg, "preemption") { // "CANCELLED ... DUE TO PREEMPTION"
			why = "Slurm preempted the job"
		}
		if why != "" {
			w.first = &cause{outcome: store.Interrupted, rank: -1, halt: errors.New(why),
				msg: fmt.Sprintf("%s (%s); --resume runs it again", why, c.msg)}
		}
		return
	}
	if c == nil || !c.outside {
		return
	}
	if ctx.Err() == nil {
		t := time.NewTimer(stopWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		w.first = &cause{outcome: store.Interrupted, rank: -1,
			msg: fmt.Sprintf("stopped by a signal (rank %d received %s with the runner); --resume runs it again", c.rank, c.signal)}
		return
	}
	if why := w.allocationEnded(); why != "" {
		w.first = &cause{outcome: store.Interrupted, rank: -1, halt: errors.New(why),
			msg: fmt.Sprintf("%s (rank %d received %s); --resume runs it again", why, c.rank, c.signal)}
	}
}

// allocationEnded asks the launcher's scheduler whether the allocation is
// ending ("" when it runs, or there is no scheduler to ask).
func (w *watcher) allocationEnded() string {
	if w.o.AllocationEnded == nil {
		return ""
	}
	return w.o.AllocationEnded()
}

// rankEndSignals are the signals a rank reports before it ends by them
// (endBySignal): the stop signals, and SIGABRT, SIGQUIT, SIGSEGV, SIGBUS and
// SIGFPE sent from outside, which Go's runtime would otherwise turn into a
// goroutine dump and exit status 2, hiding the signal (audit N16). A real
// fault inside the process (synchronous SIGSEGV) is not delivered here: the
// runtime still handles it.
var rankEndSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGABRT, syscall.SIGQUIT, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE}
