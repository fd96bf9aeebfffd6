package main

import (
	"io"
	"sync"

	"github.com/casestudy/casestudy/internal/console"
)

// stdoutErr remembers the first failed write to standard output, so that
// every command ends the same way when its output is lost (a full device:
// `casestudy status RUN > /dev/full`): exit status 3 and a line on standard
// error, where commands exited 0, 1 or 3 (audit N19). A terminal is left
// unwrapped (run draws its live progress only on a real one); a pipe whose
// reader went away is pipeGuard's.
type stdoutErr struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (s *stdoutErr) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	return n, err
}

func (s *stdoutErr) first() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// watchStdout wraps stdout unless it is a terminal.
func watchStdout(stdout io.Writer) (io.Writer, *stdoutErr) {
	if console.IsTerminal(stdout) {
		return stdout, nil
	}
	s := &stdoutErr{w: stdout}
	return s, s
}
