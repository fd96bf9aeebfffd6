package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// stopSignals end every command: Ctrl-C, kill's default, and the hang-up of
// the terminal a run was started from.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// gracefulAnnotation marks a command that stops cleanly on its own when its
// context is cancelled (run records the trial in flight as interrupted and
// prints the resume command; bench and the worker stop their processes).
const gracefulAnnotation = "casestudy/graceful"

func graceful(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[gracefulAnnotation] = "true"
	return c
}

type gracefulKey struct{}

// runMain runs the command line until it ends or a stop signal arrives. The
// signal cancels the command's context with exitcode.Interrupt as the cause.
// A graceful command then finishes its clean-up and picks its own status;
// repeated signals are ignored meanwhile. Any other command (validate reading
// a FIFO, report, ...) ends at once with 128 + the signal's number: what it
// writes goes through a temporary file and a rename, so nothing is left
// half-written.
func runMain(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var isGraceful atomic.Bool
	ctx = context.WithValue(ctx, gracefulKey{}, &isGraceful)

	var broken <-chan struct{} // stdout is a pipe whose reader has gone (pipeGuard)
	if g := guardPipe(stdout, stderr); g != nil {
		stdout, broken = g, g.broken
	}
	done := make(chan int, 1)
	go func() { done <- execute(ctx, args, stdout, stderr) }()
	select {
	case code := <-done:
		return code
	case <-broken: // as a SIGPIPE would: 141, silently unless graceful (run records the interruption)
		stop := exitcode.Interrupt{Signal: syscall.SIGPIPE}
		cancel(stop)
		if isGraceful.Load() {
			return <-done
		}
		return stop.ExitCode()
	case sig := <-sigs:
		stop := exitcode.Interrupt{Signal: sig}
		cancel(stop)
		if isGraceful.Load() {
			return <-done
		}
		fmt.Fprintf(stderr, "casestudy: %v\n", stop)
		return stop.ExitCode()
	}
}

// markGraceful tells runMain that the command about to run stops on its own.
func markGraceful(cmd *cobra.Command) {
	if cmd.Annotations[gracefulAnnotation] != "true" {
		return
	}
	if b, ok := cmd.Context().Value(gracefulKey{}).(*atomic.Bool); ok {
		b.Store(true)
	}
}
