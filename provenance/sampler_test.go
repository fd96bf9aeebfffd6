package provenance

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// fakeGPUs stands in for NVML (provenance/nvmlgpu) on machines without GPUs.
type fakeGPUs struct {
	info GPUInfo
	devs []Device
}

func (f *fakeGPUs) Info() (GPUInfo, error)    { return f.info, nil }
func (f *fakeGPUs) Devices([]string) []Device { return f.devs }

// fakeDevice plays back clock-event reasons and counters: reasons(t) is the
// bitmask at time t, and the counters integrate it exactly.
type fakeDevice struct {
	index    int
	start    time.Time
	reasons  func(since time.Duration) uint64
	counters bool
	mu       sync.Mutex
}

func (d *fakeDevice) Index() int         { return d.index }
func (d *fakeDevice) MaxSMClock() uint32 { return 1980 }

func (d *fakeDevice) Sample() store.GPUSample {
	r := d.reasons(time.Since(d.start))
	clock := uint32(1980)
	if r&ReasonSWPowerCap != 0 {
		clock = 1900
	}
	return store.GPUSample{SMClock: clock, Throttles: r}
}

// Counters integrates reasons over [start, now] in 1 ms steps.
func (d *fakeDevice) Counters() (ClockEventCounters, bool) {
	if !d.counters {
		return ClockEventCounters{}, false
	}
	now := time.Now()
	c := ClockEventCounters{At: now}
	for t := time.Duration(0); t < now.Sub(d.start); t += time.Millisecond {
		r := d.reasons(t)
		add := func(bit uint64, into *uint64) {
			if r&bit != 0 {
				*into += uint64(time.Millisecond)
			}
		}
		add(ReasonSWPowerCap, &c.SWPowerCapNS)
		add(ReasonSWThermal, &c.SWThermalNS)
		add(ReasonHWThermal, &c.HWThermalNS)
		add(ReasonHWPowerBrake, &c.HWPowerBrakeNS)
	}
	return c, true
}

// A GPU at its power cap the whole time but thermally throttled only before
// the measured window: the window is clean, the power cap shows as a clock
// deficit, and the launch is not tainted — with counters and with samples.
func TestThrottleCountsOnlyTheWindow(t *testing.T) {
	for _, counters := range []bool{true, false} {
		start := time.Now()
		dev := &fakeDevice{start: start, counters: counters, reasons: func(t time.Duration) uint64 {
			r := ReasonSWPowerCap
			if t < 150*time.Millisecond {
				r |= ReasonHWThermal
			}
			return r
		}}
		s := StartSampler([]Device{dev}, 10*time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		from := time.Now()
		s.WindowStart()
		time.Sleep(150 * time.Millisecond)
		s.WindowEnd()
		to := time.Now()
		samples := s.Stop()
		require.NotEmpty(t, samples)
		th := s.Throttle(from, to)
		require.NotNil(t, th)
		require.Len(t, th.GPUs, 1)
		g := th.GPUs[0]
		want := map[bool]string{true: "counters", false: "samples"}[counters]
		assert.Equal(t, want, g.Source)
		assert.Zero(t, g.HWThermal, "throttled before the window only")
		assert.Greater(t, g.PowerCap, 0.9, "%s: power cap all the window", want)
		assert.InDelta(t, 1-1900.0/1980, g.ClockDeficit, 1e-9)
		assert.Empty(t, Tainted(th), want)
	}
}

// Thermal throttling for 100 ms of a 300 ms window taints the launch, with the
// reason named; the counters give the share exactly.
func TestThrottleTaintsThermal(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	b := ClockEventCounters{At: at, SWPowerCapNS: 5e9, SWThermalNS: 7e9}
	e := ClockEventCounters{At: at.Add(300 * time.Millisecond), SWPowerCapNS: 5e9 + 3e8, SWThermalNS: 7e9 + 1e8}
	g := throttleOf([]store.GPUSample{{SMClock: 1900, Throttles: ReasonSWPowerCap}}, 1980)
	applyCounters(&g, b, e)
	assert.Equal(t, "counters", g.Source)
	assert.InDelta(t, 1.0/3, g.SWThermal, 1e-12)
	assert.InDelta(t, 1.0, g.PowerCap, 1e-12)
	assert.InDelta(t, 1.0/3, g.Slowed, 1e-12)
	th := &store.Throttle{GPUs: []store.GPUThrottle{g}}
	assert.Contains(t, Tainted(th), "software thermal slowdown 33.3%")
	assert.Contains(t, Tainted(th), "GPU 0")

	e.SWThermalNS = 1 // a counter that went backwards (driver reload) is no evidence
	applyCounters(&g, b, e)
	assert.Zero(t, g.SWThermal)
}

func TestTaintedRule(t *testing.T) {
	for _, tc := range []struct {
		desc string
		g    store.GPUThrottle
		want bool
	}{
		{"power cap all the time", store.GPUThrottle{PowerCap: 1, Slowed: 0}, false},
		{"thermal 1% exactly", store.GPUThrottle{SWThermal: 0.01, Slowed: 0.01}, false},
		{"power brake 2%", store.GPUThrottle{HWPowerBrake: 0.02, Slowed: 0.02}, true},
	} {
		got := Tainted(&store.Throttle{GPUs: []store.GPUThrottle{tc.g}})
		assert.Equal(t, tc.want, got != "", tc.desc)
	}
	assert.Empty(t, Tainted(nil))
}

// Samples count the taint reasons' union exactly; the display clock bit
// (0x100) and idle are no slowdown.
func TestThrottleOfSamples(t *testing.T) {
	in := []store.GPUSample{
		{SMClock: 1980, Throttles: ReasonGPUIdle | ReasonDisplayClock},
		{SMClock: 1980, Throttles: ReasonSWThermal},
		{SMClock: 1980, Throttles: ReasonSWThermal | ReasonHWSlowdown},
		{SMClock: 1980, Throttles: ReasonSWPowerCap},
	}
	g := throttleOf(in, 1980)
	assert.Equal(t, 0.5, g.Slowed)
	assert.Equal(t, 0.5, g.SWThermal)
	assert.Equal(t, 0.25, g.HWSlowdown)
	assert.Equal(t, 0.25, g.PowerCap)
	assert.Equal(t, "none", throttleOf(nil, 1980).Source)
}

func TestSamplerWithoutDevices(t *testing.T) {
	s := StartSampler(nil, 10*time.Millisecond)
	s.WindowStart()
	s.WindowEnd()
	assert.Empty(t, s.Stop())
	_ = s.Stop() // twice is fine
	assert.Nil(t, s.Throttle(time.Now(), time.Now().Add(time.Second)))
}
