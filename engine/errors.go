package engine

import (
	"errors"
	"fmt"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// Status mirrors cs_status of the C ABI.
type Status int

// The cs_status values (engine/native/include/casestudy_engine.h).
const (
	StatusOK          Status = 0
	StatusConfig      Status = 1 // the config is malformed or a value is out of range
	StatusUnsupported Status = 2 // a knob cannot be honoured here (e.g. graphs on CPU)
	StatusOOM         Status = 3 // a device or host allocator ran out of memory
	StatusComm        Status = 4 // a collective failed or timed out
	StatusRuntime     Status = 5 // anything else thrown by torch or the engine
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusConfig:
		return "config error"
	case StatusUnsupported:
		return "unsupported"
	case StatusOOM:
		return "out of memory"
	case StatusComm:
		return "communication error"
	case StatusRuntime:
		return "runtime error"
	}
	return fmt.Sprintf("status %d", int(s))
}

// Error is a failed engine call: the cs_status, the ABI function and the
// engine's message.
type Error struct {
	Status Status
	Op     string // e.g. "cs_create"
	Msg    string
}

func (e *Error) Error() string {
	if e.Op == "" {
		return "engine: " + e.Status.String()
	}
	return fmt.Sprintf("engine %s: %s: %s", e.Op, e.Status, e.Msg)
}

// Is makes errors.Is(err, ErrOOM) and the other sentinels match on Status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Msg == "" && t.Status == e.Status
}

// ExitCode maps a config error to the usage status (2); everything else is a
// failure (1).
func (e *Error) ExitCode() int {
	if e.Status == StatusConfig {
		return exitcode.Input
	}
	return exitcode.Failure
}

// Sentinels for errors.Is: they match any *Error with the same Status.
var (
	ErrConfig      error = &Error{Status: StatusConfig}
	ErrUnsupported error = &Error{Status: StatusUnsupported}
	ErrOOM         error = &Error{Status: StatusOOM}
	ErrComm        error = &Error{Status: StatusComm}
	ErrRuntime     error = &Error{Status: StatusRuntime}
)

// Errors of loading the library. Both come wrapped in a *LoadError.
var (
	ErrNoLibrary   = errors.New("engine library not found")
	ErrABIMismatch = errors.New("engine library ABI mismatch")
)

// LoadError is a failure to find, open or accept the engine library. It is an
// environment error (exit status 3): the fix is to build or point at the
// right library, not to change the study.
type LoadError struct {
	Path string // the library, when known
	Err  error  // ErrNoLibrary, ErrABIMismatch, or the dlopen/dlsym text
	Hint string // what to do
}

func (e *LoadError) Error() string {
	msg := e.Err.Error()
	if e.Path != "" {
		msg = e.Path + ": " + msg
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *LoadError) Unwrap() error { return e.Err }

// ExitCode is exitcode.Environment.
func (e *LoadError) ExitCode() int { return exitcode.Environment }

// BuildHint is the advice every load error ends with.
const BuildHint = "build it with `make engine` (or `make deps engine` on a fresh machine) " +
	"and point at it with --engine-lib or CASESTUDY_ENGINE_LIB"
