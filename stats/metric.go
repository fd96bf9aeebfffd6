package stats

// Metric is the study's objective as the statistics use it: the value of one
// launch (measure.LaunchValue reads it from a launch's record), its unit and
// which direction is better.
type Metric struct {
	Name           string `json:"name"` // throughput | tokens_per_s | mfu | tflops | step_time | memory
	Unit           string `json:"unit"` // samples/s, tokens/s, MFU, TFLOP/s, ms, bytes
	HigherIsBetter bool   `json:"higher_is_better"`
}

// Metrics are the objectives a study may name (study.Metrics lists the same).
var Metrics = map[string]Metric{
	"throughput":    {"throughput", "samples/s", true},
	"samples_per_s": {"throughput", "samples/s", true},
	"tokens_per_s":  {"tokens_per_s", "tokens/s", true},
	"mfu":           {"mfu", "MFU", true},
	"tflops":        {"tflops", "TFLOP/s", true},
	"step_time":     {"step_time", "ms", false},
	"step_ms":       {"step_time", "ms", false},
	"memory":        {"memory", "bytes", false},
	"mem_peak":      {"memory", "bytes", false},
}

// Speed reports whether the metric measures speed, so that better is
// "faster" (memory: "less memory").
func (m Metric) Speed() bool { return m.Name != "memory" }
