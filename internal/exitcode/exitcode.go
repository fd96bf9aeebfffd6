// Package exitcode is the documented set of exit statuses. Packages wrap their
// errors with a code; only cmd/casestudy turns a code into a process exit.
//
//	0   success
//	1   failure: a trial failed, crashed or timed out, a regression was found, a gate tripped
//	2   usage or input error: unknown command or flag, a flag value out of range, bad study file, missing run directory
//	3   environment error: engine library missing or of another ABI, too few GPUs, an output that cannot be written
//	4   inconclusive: casestudy compare could not judge every trial (a suspected regression, too few launches
//	    to decide, no clean launch in OLD, a trial of OLD missing from NEW, or none tested); the gate fails
//	    closed, so a CI job stops here unless it passes --inconclusive=pass
//	129 stopped by SIGHUP, 130 by SIGINT (Ctrl-C), 143 by SIGTERM (128 + the signal's number, as shells report it);
//	    a stopped run can be resumed
package exitcode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

const (
	OK          = 0
	Failure     = 1
	Input       = 2
	Environment = 3
	Interrupted = 130 // SIGINT; see ForSignal for the others
)

// Inconclusive is compare's gate when it could not show that no trial
// regressed (a suspected or undecided row, a trial of OLD missing from NEW,
// or no row tested): it fails closed.
const Inconclusive = 4

// Error carries an exit status with the error it wraps.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With wraps err with code; nil stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Usage marks err as a usage or input error (exit status 2).
func Usage(err error) error { return With(Input, err) }

// Silent is an error whose message was already printed; only its code matters.
type Silent struct{ Code int }

func (s Silent) Error() string { return "exit status" }

// Of returns the exit status for err: its code when it carries one, else 1.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var s Silent
	if errors.As(err, &s) {
		return s.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return Failure
}

// Interrupt is the cause of a command's context cancelled by a signal.
type Interrupt struct{ Signal os.Signal }

func (i Interrupt) Error() string { return "stopped by " + SignalName(i.Signal) }

// ExitCode is 128 + the signal's number.
func (i Interrupt) ExitCode() int { return ForSignal(i.Signal) }

// ForSignal is the exit status after sig: 128 + its number (130 for SIGINT,
// 143 for SIGTERM, 129 for SIGHUP), Interrupted when the number is unknown.
func ForSignal(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return Interrupted
}

// SignalName is "SIGTERM", "SIGINT", ...
func SignalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	if s, ok := sig.(syscall.Signal); ok {
		return fmt.Sprintf("signal %d (%s)", int(s), s)
	}
	return sig.String()
}

// OfStopped is the exit status of a command whose context a signal cancelled:
// ForSignal of the Interrupt cause, Interrupted when the cause is another.
func OfStopped(ctx context.Context) int {
	var i Interrupt
	if errors.As(context.Cause(ctx), &i) {
		return i.ExitCode()
	}
	return Interrupted
}
