package runner

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/study"
)

// DesignFor is the launch schedule and statistical design of a run of s on
// a machine whose device resolved to device ("cuda" or "cpu"): repeats:
// auto or a fixed number, interleaved rounds (a fresh random order each
// round, drawn from a new seed that the manifest records), the time budget,
// and one unmeasured pre-heat launch on GPUs (idle clocks and a cold GPU
// would make the first measured launch slow; CPUs have no such ramp, and CI
// stays fast).
func DesignFor(s *study.Study, device string) stats.Design {
	w := s.Workload
	var d stats.Design
	if w.Repeats == 0 {
		d = stats.AutoDesign(w.MinRepeats, w.MaxRepeats)
	} else {
		d = stats.FixedDesign(w.Repeats, w.Interleave)
	}
	d.MaxTimeS = w.MaxTime.Seconds()
	d.OrderSeed = newSeed()
	d.Preheat = device == "cuda"
	return d
}

func newSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}
