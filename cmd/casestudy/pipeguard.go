package main

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeGuard is standard output when it is a pipe: a write to a pipe whose
// reader has gone (`casestudy run | head -3`) would kill the process by
// SIGPIPE in the middle of a sweep, with no interrupted record and no resume
// command (audit N11). The guard writes through a duplicate descriptor
// (a write there fails with EPIPE instead of raising SIGPIPE), closes broken
// at the first such failure, so that runMain stops the command as a SIGPIPE
// would, and sends what follows (the summary, the resume command) to
// standard error.
type pipeGuard struct {
	mu       sync.Mutex
	out      *os.File
	fallback io.Writer
	broken   chan struct{}
	isBroken bool
}

// guardPipe returns a pipeGuard for stdout when it is a pipe (nil
// otherwise: a terminal or a file raises no SIGPIPE).
func guardPipe(stdout io.Writer, stderr io.Writer) *pipeGuard {
	f, ok := stdout.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return nil
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil
	}
	return &pipeGuard{out: os.NewFile(uintptr(fd), "stdout"), fallback: stderr, broken: make(chan struct{})}
}

func (g *pipeGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isBroken {
		return g.fallback.Write(p)
	}
	n, err := g.out.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		g.isBroken = true
		close(g.broken)
		m, ferr := g.fallback.Write(p[n:])
		return n + m, ferr
	}
	return n, err
}
