package profile

import (
	"sort"

	"github.com/casestudy/casestudy/engine"
)

// TopKernels is how many kernels a Summary keeps by name; NameMax cuts their
// names (the trace has them whole).
const (
	TopKernels = 15
	NameMax    = 200
)

// Summary is where one rank's profiled steps spent their time. Times are ms
// per step (averaged over the profiled steps); shares are fractions.
type Summary struct {
	Steps    int    `json:"steps"`              // profiled steps (summed over launches in a Mean)
	Launches int    `json:"launches,omitempty"` // launches a Mean averages; 0 or 1 for one
	Device   string `json:"device"`             // cuda | cpu
	// Time says what the kernel times are: "CUDA kernel time" (CUPTI) or "CPU
	// operator self time" (a CPU device).
	Time string `json:"time"`

	StepMS         float64 `json:"step_ms"`          // median engine step_ms of the launch's measured steps
	ProfiledStepMS float64 `json:"profiled_step_ms"` // mean engine step_ms of the profiled steps
	BusyMS         float64 `json:"busy_ms"`          // the device busy: union of kernel intervals over all streams
	// IdleMS is the step less the busy time, against the measured step on CUDA
	// (IdleOf "measured": the profiler stretches the host, not the kernels) and
	// against the profiled step on a CPU device (IdleOf "profiled"). A large
	// idle share on a GPU means the step waits for the host: launch-bound.
	IdleMS    float64 `json:"idle_ms"`
	IdleShare float64 `json:"idle_share"`
	IdleOf    string  `json:"idle_of"`

	KernelMS        float64        `json:"kernel_ms"` // sum of kernel times (above BusyMS when streams overlap)
	KernelsPerStep  float64        `json:"kernels_per_step"`
	DistinctKernels int            `json:"distinct_kernels"`
	Categories      []CategoryTime `json:"categories"` // largest first; shares of KernelMS
	Top             []KernelTime   `json:"top"`        // the TopKernels largest

	// Communication: the collectives' kernel time and how much of it ran while
	// another stream computed; exposed = comm - overlap.
	CommMS        float64 `json:"comm_ms"`
	CommOverlapMS float64 `json:"comm_overlap_ms"`
	ExposedCommMS float64 `json:"exposed_comm_ms"`

	// The profiler's cost: the profiled steps' time over the measured ones
	// less 1, and the launch's wall time spent profiling (profiler on/off, the
	// steps, reducing the events, writing the trace), in ms per launch.
	OverheadShare float64 `json:"overhead_share"`
	ExtraWallMS   float64 `json:"extra_wall_ms"`

	Trace          string `json:"trace,omitempty"` // the trace file, relative to the run directory
	TraceFormat    string `json:"trace_format,omitempty"`
	TraceBytes     int64  `json:"trace_bytes,omitempty"`
	TraceError     string `json:"trace_error,omitempty"`
	KernelsDropped int    `json:"kernels_dropped,omitempty"`
	Torch          string `json:"torch,omitempty"`

	// Error says why this launch has no profile (the launch's measurement stands).
	Error string `json:"error,omitempty"`
}

// CategoryTime is one category's time per step.
type CategoryTime struct {
	Category string  `json:"category"`
	MS       float64 `json:"ms"`
	Share    float64 `json:"share"` // of the kernel time
	Calls    float64 `json:"calls"` // per step
}

// KernelTime is one kernel's time per step.
type KernelTime struct {
	Name     string  `json:"name"`
	Category string  `json:"category"`
	MS       float64 `json:"ms"`
	Share    float64 `json:"share"` // of the kernel time
	Calls    float64 `json:"calls"` // per step
}

// Failed is the Summary of a launch whose profile could not be taken.
func Failed(err error) *Summary { return &Summary{Error: err.Error()} }

// Summarize turns the engine's raw profile into per-step figures. measured
// are the launch's measured steps on the same rank: their median step time is
// what the idle time and the overhead are judged against.
func Summarize(p engine.Profile, measured []engine.StepMetrics) *Summary {
	n := float64(max(p.Steps, 1))
	s := &Summary{Steps: p.Steps, Launches: 1, Device: p.Device, Torch: p.Torch, Time: "CPU operator self time",
		KernelsDropped: p.KernelsDropped, TraceFormat: p.TraceFormat, TraceBytes: p.TraceBytes, TraceError: p.TraceError}
	if p.Device == "cuda" {
		s.Time = "CUDA kernel time"
	}
	ms := make([]float64, 0, len(measured))
	for _, m := range measured {
		ms = append(ms, m.StepMS)
	}
	s.StepMS = median(ms)
	s.ProfiledStepMS = mean(p.StepMS)
	s.BusyMS = p.BusyMS / n
	s.ExtraWallMS = p.ProfileMS + p.AnalysisMS + p.TraceMS
	if s.StepMS > 0 && s.ProfiledStepMS > 0 {
		s.OverheadShare = s.ProfiledStepMS/s.StepMS - 1
	}

	kernels := map[string]*KernelTime{}
	for _, k := range p.Kernels {
		kt := kernels[k.Name]
		if kt == nil {
			kt = &KernelTime{Name: k.Name, Category: Category(k.Name)}
			kernels[k.Name] = kt
		}
		kt.MS += k.MS / n
		kt.Calls += float64(k.Calls) / n
		if kt.Category == Communication {
			s.CommMS += k.MS / n
			s.CommOverlapMS += k.OverlapMS / n
		}
	}
	list := make([]KernelTime, 0, len(kernels))
	for _, k := range kernels {
		list = append(list, *k)
	}
	s.setKernels(list)
	s.ExposedCommMS = max(0, s.CommMS-s.CommOverlapMS)
	s.setIdle()
	return s
}

// setKernels fills the kernel totals, the categories and the top kernels
// from per-step kernel times.
func (s *Summary) setKernels(list []KernelTime) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].MS != list[j].MS {
			return list[i].MS > list[j].MS
		}
		return list[i].Name < list[j].Name
	})
	s.KernelMS, s.KernelsPerStep, s.DistinctKernels = 0, 0, len(list)
	cats := map[string]*CategoryTime{}
	for _, k := range list {
		s.KernelMS += k.MS
		s.KernelsPerStep += k.Calls
		c := cats[k.Category]
		if c == nil {
			c = &CategoryTime{Category: k.Category}
			cats[k.Category] = c
		}
		c.MS += k.MS
		c.Calls += k.Calls
	}
	share := func(ms float64) float64 {
		if s.KernelMS <= 0 {
			return 0
		}
		return ms / s.KernelMS
	}
	s.Categories = s.Categories[:0]
	for _, c := range cats {
		c.Share = share(c.MS)
		s.Categories = append(s.Categories, *c)
	}
	sort.Slice(s.Categories, func(i, j int) bool {
		a, b := s.Categories[i], s.Categories[j]
		if a.MS != b.MS {
			return a.MS > b.MS
		}
		return a.Category < b.Category
	})
	s.Top = nil
	for i, k := range list {
		if i == TopKernels {
			break
		}
		k.Share = share(k.MS)
		if len(k.Name) > NameMax {
			k.Name = k.Name[:NameMax-1] + "…"
		}
		s.Top = append(s.Top, k)
	}
}

// setIdle sets the idle time from the busy time and the step it is judged
// against (see Summary.IdleMS).
func (s *Summary) setIdle() {
	base := s.ProfiledStepMS
	s.IdleOf = "profiled"
	if s.Device == "cuda" && s.StepMS > 0 {
		base, s.IdleOf = s.StepMS, "measured"
	}
	s.IdleMS, s.IdleShare = 0, 0
	if base > 0 {
		s.IdleMS = max(0, base-s.BusyMS)
		s.IdleShare = s.IdleMS / base
	}
}

// OK reports whether the summary holds a profile.
func (s *Summary) OK() bool { return s != nil && s.Error == "" && s.Steps > 0 }

// MS is a category's time per step (0 when absent).
func (s *Summary) MS(category string) float64 {
	for _, c := range s.Categories {
		if c.Category == category {
			return c.MS
		}
	}
	return 0
}

// Share is a category's share of the kernel time (0 when absent).
func (s *Summary) Share(category string) float64 {
	if s.KernelMS <= 0 {
		return 0
	}
	return s.MS(category) / s.KernelMS
}

// Mean averages the profiles of several launches (a trial's repeats): times
// and calls are means over the launches that have a profile; shares are
// recomputed from the means. Nil when none has one.
func Mean(ps []*Summary) *Summary {
	var ok []*Summary
	for _, p := range ps {
		if p.OK() {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	if len(ok) == 1 {
		c := *ok[0]
		c.Launches = 1
		return &c
	}
	n := float64(len(ok))
	first := ok[0]
	m := &Summary{Launches: len(ok), Device: first.Device, Time: first.Time, Torch: first.Torch,
		TraceFormat: first.TraceFormat}
	kernels := map[string]*KernelTime{}
	cats := map[string]*CategoryTime{}
	for _, p := range ok {
		m.Steps += p.Steps
		m.StepMS += p.StepMS / n
		m.ProfiledStepMS += p.ProfiledStepMS / n
		m.BusyMS += p.BusyMS / n
		m.CommMS += p.CommMS / n
		m.CommOverlapMS += p.CommOverlapMS / n
		m.ExtraWallMS += p.ExtraWallMS / n
		m.TraceBytes += p.TraceBytes / int64(len(ok))
		m.KernelsDropped = max(m.KernelsDropped, p.KernelsDropped)
		for _, c := range p.Categories {
			t := cats[c.Category]
			if t == nil {
				t = &CategoryTime{Category: c.Category}
				cats[c.Category] = t
			}
			t.MS += c.MS / n
			t.Calls += c.Calls / n
		}
		for _, k := range p.Top {
			t := kernels[k.Name]
			if t == nil {
				t = &KernelTime{Name: k.Name, Category: k.Category}
				kernels[k.Name] = t
			}
			t.MS += k.MS / n
			t.Calls += k.Calls / n
		}
		m.KernelMS += p.KernelMS / n
		m.KernelsPerStep += p.KernelsPerStep / n
		m.DistinctKernels = max(m.DistinctKernels, p.DistinctKernels)
	}
	if m.StepMS > 0 && m.ProfiledStepMS > 0 {
		m.OverheadShare = m.ProfiledStepMS/m.StepMS - 1
	}
	m.ExposedCommMS = max(0, m.CommMS-m.CommOverlapMS)
	for _, c := range cats {
		if m.KernelMS > 0 {
			c.Share = c.MS / m.KernelMS
		}
		m.Categories = append(m.Categories, *c)
	}
	sort.Slice(m.Categories, func(i, j int) bool {
		a, b := m.Categories[i], m.Categories[j]
		if a.MS != b.MS {
			return a.MS > b.MS
		}
		return a.Category < b.Category
	})
	for _, k := range kernels {
		if m.KernelMS > 0 {
			k.Share = k.MS / m.KernelMS
		}
		m.Top = append(m.Top, *k)
	}
	sort.Slice(m.Top, func(i, j int) bool {
		if m.Top[i].MS != m.Top[j].MS {
			return m.Top[i].MS > m.Top[j].MS
		}
		return m.Top[i].Name < m.Top[j].Name
	})
	if len(m.Top) > TopKernels {
		m.Top = m.Top[:TopKernels]
	}
	m.setIdle()
	return m
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
