package engine

// ProfileRequest is cs_profile's request: how many more steps to run under the
// profiler and where to write the Chrome/Perfetto trace ("" writes none).
type ProfileRequest struct {
	Steps     int    `json:"steps"`
	TracePath string `json:"trace_path"`
}

// Profile is what cs_profile returns: raw totals over the profiled steps
// (package profile turns them into per-step shares). Times in ms.
type Profile struct {
	Steps   int           `json:"steps"`
	Device  string        `json:"device"` // cuda: kernels are CUDA kernels, copies, memsets; cpu: CPU operators
	Torch   string        `json:"torch"`
	Events  int           `json:"events"`  // events the profiler recorded (CPU and device)
	WallMS  []float64     `json:"wall_ms"` // host wall time of each profiled step
	StepMS  []float64     `json:"step_ms"` // the engine's step_ms of each profiled step
	BusyMS  float64       `json:"busy_ms"` // union of the kernels' intervals over every stream (CPU: thread)
	Kernels []KernelTotal `json:"kernels"` // by time, largest first

	KernelsDropped int     `json:"kernels_dropped,omitempty"` // left out to fit the output buffer
	DroppedMS      float64 `json:"dropped_ms,omitempty"`

	ProfileMS  float64 `json:"profile_ms"`  // profiler on, steps, profiler off
	AnalysisMS float64 `json:"analysis_ms"` // reducing the events
	TraceMS    float64 `json:"trace_ms"`    // writing the trace

	TracePath   string `json:"trace_path,omitempty"`
	TraceFormat string `json:"trace_format,omitempty"` // kineto | engine (a libtorch without Kineto)
	TraceBytes  int64  `json:"trace_bytes,omitempty"`
	TraceError  string `json:"trace_error,omitempty"` // the trace could not be written
	TraceNote   string `json:"trace_note,omitempty"`  // why Kineto's own trace was not used on CUDA
}

// KernelTotal is one kernel (CPU operator) name's totals over the profiled
// steps: calls, time (CPU operators: self time) and the time it ran while
// another stream (CPU: thread) was busy too.
type KernelTotal struct {
	Name      string  `json:"name"` // cut at 1000 characters
	Calls     int     `json:"calls"`
	MS        float64 `json:"ms"`
	OverlapMS float64 `json:"overlap_ms"`
}
