package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
)

// A damaged engine library (a truncated file: SIGBUS in dlopen; a crashing
// cs_abi_version or constructor: SIGSEGV, abort) would kill the process that
// loads it. `run` therefore probes it in a child process first, the hidden
// command below, and turns a crash into a one-line environment error (exit
// status 3) naming the library (audit N15). The runner itself never loads
// the library: its ranks do.

const engineProbeCommand = "__engine-probe"

// engineProbeTimeout bounds the child: a constructor that hangs is as bad as
// one that crashes.
var engineProbeTimeout = 2 * time.Minute

func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:    engineProbeCommand + " LIB",
			Hidden: true,
			Args:   cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				path, bi, err := binding.Probe(args[0])
				if err != nil {
					return exitcode.With(exitcode.Environment, err)
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(probeAnswer{Path: path, Build: bi})
			},
		}
	})
}

type probeAnswer struct {
	Path  string           `json:"path"`
	Build engine.BuildInfo `json:"build"`
}

// probeEngine is run's runner.ProbeEngine: binding.Probe in a child process
// (in-process under go test, whose binary runs as casestudy only when asked).
func probeEngine(explicit string) (string, engine.BuildInfo, error) {
	if testing.Testing() {
		return binding.Probe(explicit)
	}
	exe, err := os.Executable()
	if err != nil {
		return binding.Probe(explicit)
	}
	return probeEngineIn(exe, os.Environ(), explicit)
}

// probeEngineIn runs exe's hidden probe command on the library explicit
// names (or engine.Discover finds) with env.
func probeEngineIn(exe string, env []string, explicit string) (string, engine.BuildInfo, error) {
	path, err := engine.Discover(explicit)
	if err != nil {
		return "", engine.BuildInfo{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, engineProbeCommand, path)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives a runner stopped meanwhile
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var a probeAnswer
	if runErr == nil && json.Unmarshal(out.Bytes(), &a) == nil {
		return a.Path, a.Build, nil
	}
	fail := func(format string, args ...any) (string, engine.BuildInfo, error) {
		return path, engine.BuildInfo{}, exitcode.With(exitcode.Environment, &engine.LoadError{Path: path,
			Err: fmt.Errorf(format, args...), Hint: engine.BuildHint})
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fail("loading it did not finish within %s (a constructor that hangs?)", engineProbeTimeout)
	case errors.As(runErr, &ee) && ee.ProcessState != nil:
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fail("loading it crashed the process (%s): the file is damaged or not an engine library", signalName(ws.Signal()))
		}
		if msg := lastError(errb.String()); msg != "" {
			return path, engine.BuildInfo{}, exitcode.With(exitcode.Environment, errors.New(msg))
		}
		if ee.ExitCode() == 2 { // Go's runtime after a fatal signal inside the library
			return fail("loading it crashed the process (%s)", firstLine(errb.String()))
		}
		return fail("loading it failed with exit status %d", ee.ExitCode())
	case runErr != nil:
		return fail("could not start a process to load it: %v", runErr)
	}
	return fail("its probe answered no build facts")
}

// lastError is the message of a "casestudy: ..." line of stderr ("" none).
func lastError(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m, ok := strings.CutPrefix(lines[i], "casestudy: "); ok {
			return m
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func signalName(s syscall.Signal) string { return unix.SignalName(s) }
