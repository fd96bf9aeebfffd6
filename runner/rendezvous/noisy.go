package rendezvous

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Strangers on the rendezvous port (refused joins, connections dropped for
// never saying hello) are logged, but a flood of them must not flood the
// run's output (audit N13: 76,234 lines from one unprivileged user): the
// first noiseLines are logged, the rest counted and summed up at Close.

const noiseLines = 10

// noisyf logs one stranger's event, or counts it past noiseLines (s.mu held).
func (s *Server) noisyf(format string, args ...any) {
	s.noise++
	if s.noise <= noiseLines {
		s.logf(format, args...)
	}
}

// summarizeNoise logs how many strangers' events were not shown (s.mu held).
func (s *Server) summarizeNoise() {
	if n := s.noise - noiseLines; n > 0 {
		s.logf("rendezvous: %d more refused or dropped connections were not shown (someone else is connecting to this port)", n)
	}
}

// evictable picks the pending connection to drop when too many wait without
// a hello: the oldest that has sent nothing yet, else the oldest. A rank's
// connection (or its Gloo store's) sends its hello at once, so a churn of
// strangers that connect and say nothing cannot push it out before its hello
// is read (audit N13, R-10).
func evictable(pending []net.Conn, spoke func(net.Conn) bool) int {
	for i, c := range pending {
		if !spoke(c) {
			return i
		}
	}
	return 0
}

// hasSpoken says whether bytes from c wait unread in the kernel (FIONREAD).
func hasSpoken(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}
