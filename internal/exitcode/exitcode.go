// Package exitcode is the documented set of exit statuses. Packages wrap their
// errors with a code; only cmd/casestudy turns a code into a process exit.
//
//	0  success
//	1  failure: a run failed, a regression was found, a gate tripped
//	2  usage or input error: bad flag, bad study file, missing run directory
//	3  environment error: engine library missing or of another ABI, too few GPUs
//	130 interrupted (Ctrl-C); the run directory can be resumed
package exitcode

import "errors"

const (
	OK          = 0
	Failure     = 1
	Input       = 2
	Environment = 3
	Interrupted = 130
)

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
