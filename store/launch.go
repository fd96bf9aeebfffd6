package store

import "time"

// Timeline is where a wall-clock stretch of a launch went: phases one after
// the other from Start, each starting where the previous ended, so their
// durations add up to End − Start. docs/results-format.md names the phases.
type Timeline struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Phases []Phase   `json:"phases"`
}

// Phase is one named stretch of a timeline.
type Phase struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
}

// WallMS is End − Start in milliseconds. Start and End are wall-clock
// readings: a clock stepped back between them (NTP, a VM restored) would make
// that negative, so then it is the sum of the phases, which were measured on
// the monotonic clock (audit N22).
func (t *Timeline) WallMS() float64 {
	if !t.End.Before(t.Start) {
		return float64(t.End.Sub(t.Start)) / float64(time.Millisecond)
	}
	ms := 0.0
	for _, p := range t.Phases {
		ms += max(p.MS, 0)
	}
	return ms
}

// PhaseMS is the time of the phases called name (0 when there is none).
func (t *Timeline) PhaseMS(name string) float64 {
	ms := 0.0
	for _, p := range t.Phases {
		if p.Name == name {
			ms += p.MS
		}
	}
	return ms
}

// Throttle is what slowed a launch's GPUs inside its measured window (the
// first rank's first measured step to the last rank's last one).
type Throttle struct {
	WindowStart time.Time     `json:"window_start"`
	WindowEnd   time.Time     `json:"window_end"`
	GPUs        []GPUThrottle `json:"gpus"`
}

// GPUThrottle is one GPU's share of a measured window spent in each
// clock-event reason (fractions of the window, 0..1), and its clock deficit.
type GPUThrottle struct {
	GPU int `json:"gpu"`
	// Source is how the fractions were measured: "counters" (NVML's
	// cumulative clock-event counters read at the window's start and end;
	// hw_slowdown still from samples) or "samples" (the clock-event reasons
	// sampled inside the window, counted).
	Source       string  `json:"source"`
	Samples      int     `json:"samples"` // samples inside the window
	PowerCap     float64 `json:"power_cap"`
	SWThermal    float64 `json:"sw_thermal"`
	HWThermal    float64 `json:"hw_thermal"`
	HWPowerBrake float64 `json:"hw_power_brake"`
	HWSlowdown   float64 `json:"hw_slowdown"`
	// Slowed is the share of the window in any of the four slowdowns above
	// (samples: exact; counters: their sum, an upper bound of the union). Over
	// 1% taints the launch.
	Slowed float64 `json:"slowed"`
	// SMClockMHz is the mean SM clock of the samples inside the window;
	// ClockDeficit is 1 − SMClockMHz / SMClockMaxMHz (the power cap's cost).
	SMClockMHz    float64 `json:"sm_mhz_mean,omitempty"`
	SMClockMaxMHz uint32  `json:"sm_mhz_max,omitempty"`
	ClockDeficit  float64 `json:"clock_deficit,omitempty"`
}

// Overlap says how a launch shared the machine with its neighbours when
// launches are prepared ahead (casestudy run --overlap).
type Overlap struct {
	// Mode is the run's --overlap mode (tail, on, aa or aa-tail; absent in
	// records written before it was recorded).
	Mode string `json:"mode,omitempty"`
	// PreparedAhead: this launch's processes were started, joined the
	// rendezvous and loaded the engine library while the previous launch ran.
	PreparedAhead bool `json:"prepared_ahead,omitempty"`
	// NextPrepared: the next launch was prepared while this one ran;
	// InWindowMS is how much of that preparation fell inside this launch's
	// measured window.
	NextPrepared bool    `json:"next_prepared,omitempty"`
	InWindowMS   float64 `json:"in_window_ms"`
}

// NCCLTuning is what NCCL chose for the collectives one rank launched, read
// from its log's TUNING lines (NCCL prints them on the communicator's rank 0).
type NCCLTuning struct {
	Lines   int          `json:"lines"`
	Choices []NCCLChoice `json:"choices"` // by op, algorithm, protocol
}

// NCCLChoice is one algorithm/protocol pair NCCL used for an operation.
type NCCLChoice struct {
	Op       string `json:"op,omitempty"` // AllReduce, AllGather, ...; "" in releases that do not name it
	Algo     string `json:"algo"`         // RING, TREE, NVLS, NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN, PAT
	Proto    string `json:"proto"`        // LL, LL128, SIMPLE
	Count    int    `json:"count"`
	MinBytes int64  `json:"min_bytes"`
	MaxBytes int64  `json:"max_bytes"`
}
