package provenance

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/casestudy/casestudy/store"
)

// Sampler reads the SM clock, power, temperature and clock-event reasons of a
// launch's GPUs every interval while the launch runs, and NVML's cumulative
// clock-event counters when the measured window opens and closes.
type Sampler struct {
	devs  []Device
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []store.GPUSample
	begin   map[int]ClockEventCounters // by GPU index, at the window's start
	end     map[int]ClockEventCounters
}

// StartSampler samples devs every interval from now on (GPUSample.T counts
// seconds from now); without devices it records nothing.
func StartSampler(devs []Device, interval time.Duration) *Sampler {
	s := &Sampler{devs: devs, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		begin: map[int]ClockEventCounters{}, end: map[int]ClockEventCounters{}}
	if len(devs) == 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.mu.Lock()
			devs := s.devs
			s.mu.Unlock()
			for _, d := range devs {
				sm := d.Sample()
				sm.T, sm.GPU = time.Since(s.start).Seconds(), d.Index()
				s.mu.Lock()
				s.samples = append(s.samples, sm)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Start is when sampling began (GPUSample.T = 0).
func (s *Sampler) Start() time.Time { return s.start }

// WindowStart reads the clock-event counters as the measured window opens.
func (s *Sampler) WindowStart() { s.readCounters(s.begin) }

// WindowEnd reads them again as it closes.
func (s *Sampler) WindowEnd() { s.readCounters(s.end) }

// Retarget samples devs from now on instead of the devices it started with,
// and drops the samples already taken of GPUs not among devs: the runner's
// guess of a launch's GPUs gives way to the GPUs its ranks reported (Slurm).
// Call it before the measured window opens. A sampler started without
// devices stays without.
func (s *Sampler) Retarget(devs []Device) {
	select {
	case <-s.done:
		return
	default:
	}
	keep := map[int]bool{}
	for _, d := range devs {
		keep[d.Index()] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devs = devs
	s.samples = slices.DeleteFunc(s.samples, func(g store.GPUSample) bool { return !keep[g.GPU] })
}

func (s *Sampler) readCounters(into map[int]ClockEventCounters) {
	s.mu.Lock()
	devs := s.devs
	s.mu.Unlock()
	for _, d := range devs {
		if c, ok := d.Counters(); ok {
			s.mu.Lock()
			into[d.Index()] = c
			s.mu.Unlock()
		}
	}
}

// Stop ends sampling (twice is fine) and returns the samples.
func (s *Sampler) Stop() []store.GPUSample {
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// Throttle measures what slowed each GPU inside the measured window
// [from, to]: from the counters read at the window's ends where both exist,
// else from the samples inside the window. Call it after Stop. It returns nil
// without devices or without a window.
func (s *Sampler) Throttle(from, to time.Time) *store.Throttle {
	if len(s.devs) == 0 || from.IsZero() || !to.After(from) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	th := &store.Throttle{WindowStart: from.UTC(), WindowEnd: to.UTC()}
	lo, hi := from.Sub(s.start).Seconds(), to.Sub(s.start).Seconds()
	for _, d := range s.devs {
		var in []store.GPUSample
		for _, sm := range s.samples {
			if sm.GPU == d.Index() && sm.T >= lo && sm.T <= hi {
				in = append(in, sm)
			}
		}
		b, okB := s.begin[d.Index()]
		e, okE := s.end[d.Index()]
		g := throttleOf(in, d.MaxSMClock())
		if okB && okE && e.At.After(b.At) {
			applyCounters(&g, b, e)
		}
		g.GPU = d.Index()
		th.GPUs = append(th.GPUs, g)
	}
	return th
}

// throttleOf counts the samples of a window by reason, and their mean SM clock
// against maxClock.
func throttleOf(in []store.GPUSample, maxClock uint32) store.GPUThrottle {
	g := store.GPUThrottle{Source: "samples", Samples: len(in), SMClockMaxMHz: maxClock}
	if len(in) == 0 {
		g.Source = "none"
		return g
	}
	frac := func(mask uint64) float64 {
		n := 0
		for _, sm := range in {
			if sm.Throttles&mask != 0 {
				n++
			}
		}
		return float64(n) / float64(len(in))
	}
	g.PowerCap, g.SWThermal, g.HWThermal = frac(ReasonSWPowerCap), frac(ReasonSWThermal), frac(ReasonHWThermal)
	g.HWPowerBrake, g.HWSlowdown = frac(ReasonHWPowerBrake), frac(ReasonHWSlowdown)
	g.Slowed = frac(TaintMask)
	sum := 0.0
	for _, sm := range in {
		sum += float64(sm.SMClock)
	}
	g.SMClockMHz = sum / float64(len(in))
	if maxClock > 0 {
		g.ClockDeficit = max(0, 1-g.SMClockMHz/float64(maxClock))
	}
	return g
}

// applyCounters replaces the sampled fractions with the exact ones from two
// counter readings (hardware slowdown has no counter and stays sampled).
func applyCounters(g *store.GPUThrottle, b, e ClockEventCounters) {
	span := float64(e.At.Sub(b.At).Nanoseconds())
	frac := func(x, y uint64) float64 {
		if y < x { // a counter reset (driver reload): no evidence
			return 0
		}
		return min(1, float64(y-x)/span)
	}
	g.Source = "counters"
	g.PowerCap = frac(b.SWPowerCapNS, e.SWPowerCapNS)
	g.SWThermal = frac(b.SWThermalNS, e.SWThermalNS)
	g.HWThermal = frac(b.HWThermalNS, e.HWThermalNS)
	g.HWPowerBrake = frac(b.HWPowerBrakeNS, e.HWPowerBrakeNS)
	g.Slowed = max(min(1, g.SWThermal+g.HWThermal+g.HWPowerBrake), g.HWSlowdown)
}

// TaintLimit is the share of a measured window a GPU may spend thermally
// throttled, in hardware slowdown or power brake before the launch is tainted.
const TaintLimit = 0.01

// Tainted says why a launch's measurement cannot be trusted ("" when it can):
// a GPU spent more than TaintLimit of the window thermally throttled (software
// or hardware), in hardware slowdown or power brake. The power cap never
// taints: it shows as the clock deficit.
func Tainted(th *store.Throttle) string {
	if th == nil {
		return ""
	}
	for _, g := range th.GPUs {
		if g.Slowed <= TaintLimit {
			continue
		}
		var why []string
		for _, r := range []struct {
			name string
			f    float64
		}{{"software thermal slowdown", g.SWThermal}, {"hardware thermal slowdown", g.HWThermal},
			{"hardware power brake", g.HWPowerBrake}, {"hardware slowdown", g.HWSlowdown}} {
			if r.f > 0 {
				why = append(why, fmt.Sprintf("%s %.1f%%", r.name, 100*r.f))
			}
		}
		return fmt.Sprintf("GPU %d was slowed for %.1f%% of the measured window (over %.0f%%; %s, from %s)",
			g.GPU, 100*g.Slowed, 100*TaintLimit, strings.Join(why, ", "), g.Source)
	}
	return ""
}
