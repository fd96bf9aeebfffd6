// Package checklist holds the best-practice rules (course chapter 30) that read a
// run's results and environment and say what to do next.
package checklist

// Status is the verdict of one rule on one run.
type Status string

const (
	Pass          Status = "pass"
	Finding       Status = "finding"
	NotApplicable Status = "not_applicable"
)

// Severity orders findings; --fail-on gates on it.
type Severity string

const (
	Info    Severity = "info"
	Warning Severity = "warning"
	Error   Severity = "error"
)

// Result is one rule's verdict with its evidence.
type Result struct {
	RuleID         string   `json:"rule"`
	Title          string   `json:"title"`
	Chapter        int      `json:"chapter"`
	Severity       Severity `json:"severity"`
	Status         Status   `json:"status"`
	Message        string   `json:"message"`                  // what was seen, with the numbers
	Evidence       []string `json:"evidence,omitempty"`       // numbers and where they come from
	Trials         []string `json:"trials,omitempty"`         // trial IDs the evidence comes from
	Recommendation string   `json:"recommendation,omitempty"` // what to do
	// Thresholds are the values the rule judged with (defaults and overrides).
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
}
