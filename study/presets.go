package study

import "github.com/casestudy/casestudy/engine"

// Families are the model families the engine trains (engine.Models is the
// table; the engine library's cs_models agrees, engine/binding tests it).
var Families = engine.Families()

// Presets are each family's size presets (engine.Models).
var Presets = func() map[string][]string {
	m := map[string][]string{}
	for _, f := range engine.Models {
		m[f.Family] = engine.Presets(f.Family)
	}
	return m
}()

// Strategies are the sweep strategies.
var Strategies = []string{"grid", "one-at-a-time", "list", "greedy"}

// Metrics are the objective metrics and the goal each one naturally has.
var Metrics = map[string]string{
	"throughput":   "max", // samples/s of the whole trial
	"tokens_per_s": "max",
	"mfu":          "max",
	"tflops":       "max",
	"step_time":    "min", // median step time
	"memory":       "min", // peak device memory per rank
}

// ReportFormats are the formats a report can be written in.
var ReportFormats = []string{"html", "md", "json"}

// Workload defaults, used when no file in the extends chain sets them.
const (
	DefaultWarmup  = 10
	DefaultSteps   = 50
	DefaultRepeats = 1
	// DefaultMinRepeats and DefaultMaxRepeats bound repeats: auto.
	DefaultMinRepeats = 5
	DefaultMaxRepeats = 20
	DefaultSeed       = 1
)
