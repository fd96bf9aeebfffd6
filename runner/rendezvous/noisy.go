package rendezvous

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
