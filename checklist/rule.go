package checklist

import (
	"fmt"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/store"
)

// Threshold is one tunable number of a rule; a study overrides it in its
// `checklist:` section (thresholds: {RULE: {NAME: VALUE}}).
type Threshold struct {
	Name    string  `json:"name"`
	Default float64 `json:"default"`
	Unit    string  `json:"unit,omitempty"` // "x" ratio, "fraction", "ms", "GB/s", "steps" ...
	Doc     string  `json:"doc"`
}

// Rule is one entry of the registry.
type Rule struct {
	ID         string      `json:"id"`
	Title      string      `json:"title"`
	Chapter    int         `json:"chapter"` // the course chapter that explains it (internal/course)
	Severity   Severity    `json:"severity"`
	Rationale  string      `json:"rationale"`
	Needs      []string    `json:"needs"` // metrics and run facts it reads
	Thresholds []Threshold `json:"thresholds,omitempty"`

	check func(c *evalContext) verdict
}

// verdict is what a rule's check returns; Evaluate fills in the rule's facts.
type verdict struct {
	Status         Status
	Severity       Severity // "" = the rule's severity
	Message        string
	Evidence       []string
	Trials         []string
	Recommendation string
}

// Config carries a study's overrides (study.Checklist): rules to skip and
// thresholds by rule ID and threshold name.
type Config struct {
	Disable    []string                      `json:"disable,omitempty"`
	Thresholds map[string]map[string]float64 `json:"thresholds,omitempty"`
}

var (
	registry []*Rule
	byID     = map[string]*Rule{}
)

// The registry, in the order Evaluate reports: compute, kernel profiles,
// communication, NCCL evidence, links, pipeline, resources, the run as a
// whole, then what makes its numbers untrustworthy.
func init() {
	for _, group := range [][]*Rule{computeRules, profileRules, commRules, ncclRules, topoRules, transportRules, pipelineRules, zeroRules, tpRules, resourceRules, runRules, trustRules} {
		register(group...)
	}
}

// register adds rules in the order Evaluate reports them.
func register(rules ...*Rule) {
	for _, r := range rules {
		if _, dup := byID[r.ID]; dup {
			panic("checklist: duplicate rule " + r.ID)
		}
		registry = append(registry, r)
		byID[r.ID] = r
	}
}

// Rules returns every rule in evaluation order.
func Rules() []*Rule { return registry }

// threshold returns the named threshold's definition.
func (r *Rule) threshold(name string) (Threshold, bool) {
	for _, t := range r.Thresholds {
		if t.Name == name {
			return t, true
		}
	}
	return Threshold{}, false
}

// ConfigProblem is one wrong entry of a study's checklist section: an unknown
// rule under disable (Disable) or thresholds, an unknown threshold name, or a
// threshold value outside the range its rule can use (bounds.go).
type ConfigProblem struct {
	Rule      string // the rule ID as written
	Threshold string // the threshold name as written; "" for a rule
	Disable   bool   // the entry is under checklist.disable
	Msg       string // "checklist.disable: unknown rule ..."
}

// Validate checks that every rule ID and threshold name of the config exists,
// naming the closest valid one, and that every threshold value is in its range,
// so a typo in a study is an input error rather than a silently ignored (or
// silently wrong) override.
func (cfg Config) Validate() error {
	ps := cfg.Problems()
	if len(ps) == 0 {
		return nil
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Msg
	}
	return fmt.Errorf("%s", strings.Join(lines, "\n"))
}

// Problems lists what Validate refuses, one entry each, so a caller can say
// where each is written.
func (cfg Config) Problems() []ConfigProblem {
	var out []ConfigProblem
	for _, id := range cfg.Disable {
		if _, ok := byID[id]; !ok {
			out = append(out, ConfigProblem{Rule: id, Disable: true,
				Msg: fmt.Sprintf("checklist.disable: unknown rule %q%s", id, suggest(id, ruleIDs()))})
		}
	}
	ids := make([]string, 0, len(cfg.Thresholds))
	for id := range cfg.Thresholds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			out = append(out, ConfigProblem{Rule: id,
				Msg: fmt.Sprintf("checklist.thresholds: unknown rule %q%s", id, suggest(id, ruleIDs()))})
			continue
		}
		names := make([]string, 0, len(cfg.Thresholds[id]))
		for n := range cfg.Thresholds[id] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if t, ok := r.threshold(n); ok {
				if b, ok := r.boundOf(t); ok {
					if why := b.check(cfg.Thresholds[id][n]); why != "" {
						out = append(out, ConfigProblem{Rule: id, Threshold: n,
							Msg: fmt.Sprintf("checklist.thresholds.%s.%s: %s: %s takes %s in %s, e.g. its default %s (%s)",
								id, n, why, n, b.What, b, boundNum(t.Default), t.Doc)})
					}
				}
				continue
			}
			var valid []string
			for _, t := range r.Thresholds {
				valid = append(valid, t.Name)
			}
			msg := fmt.Sprintf("checklist.thresholds.%s: rule %s has no thresholds", id, id)
			if len(valid) > 0 {
				msg = fmt.Sprintf("checklist.thresholds.%s: unknown threshold %q (valid: %s)", id, n, strings.Join(valid, ", "))
			}
			out = append(out, ConfigProblem{Rule: id, Threshold: n, Msg: msg})
		}
	}
	return out
}

func ruleIDs() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.ID
	}
	return out
}

// Evaluate applies every rule to the run, in registry order. A disabled rule
// is reported not_applicable with the reason. Unknown IDs and threshold names
// in cfg are ignored here: call cfg.Validate first to report them.
func Evaluate(run *store.Run, cfg Config) []Result {
	disabled := map[string]bool{}
	for _, id := range cfg.Disable {
		disabled[id] = true
	}
	view := newRunView(run)
	out := make([]Result, 0, len(registry))
	for _, r := range registry {
		res := Result{RuleID: r.ID, Title: r.Title, Chapter: r.Chapter, Severity: r.Severity}
		th := r.resolve(cfg)
		res.Thresholds = th
		if disabled[r.ID] {
			res.Status = NotApplicable
			res.Message = "disabled by the study's checklist.disable"
			out = append(out, res)
			continue
		}
		v := r.check(&evalContext{run: view, th: th, cfg: cfg})
		res.Status = v.Status
		if v.Severity != "" {
			res.Severity = v.Severity
		}
		res.Message = v.Message
		res.Evidence = v.Evidence
		res.Trials = dedupe(v.Trials)
		res.Recommendation = v.Recommendation
		out = append(out, res)
	}
	return out
}

// resolve returns the rule's thresholds with the config's overrides applied.
func (r *Rule) resolve(cfg Config) map[string]float64 {
	if len(r.Thresholds) == 0 {
		return nil
	}
	th := make(map[string]float64, len(r.Thresholds))
	for _, t := range r.Thresholds {
		th[t.Name] = t.Default
	}
	for n, v := range cfg.Thresholds[r.ID] {
		if _, ok := th[n]; ok {
			th[n] = v
		}
	}
	return th
}

// evalContext is what a rule's check sees.
type evalContext struct {
	run *runView
	th  map[string]float64
	cfg Config
}

// of returns another rule's resolved threshold, for a rule that must judge a
// measurement as that rule does (the same study override applies to both);
// asking for an undeclared one is a bug.
func (c *evalContext) of(rule, name string) float64 {
	r, ok := byID[rule]
	if !ok {
		panic("checklist: unknown rule " + rule)
	}
	v, ok := r.resolve(c.cfg)[name]
	if !ok {
		panic("checklist: undeclared threshold " + rule + "." + name)
	}
	return v
}

// t returns a resolved threshold; asking for an undeclared one is a bug.
func (c *evalContext) t(name string) float64 {
	v, ok := c.th[name]
	if !ok {
		panic("checklist: undeclared threshold " + name)
	}
	return v
}

// SeverityRank orders severities: info < warning < error; unknown is -1.
func SeverityRank(s Severity) int {
	switch s {
	case Info:
		return 0
	case Warning:
		return 1
	case Error:
		return 2
	}
	return -1
}

// ParseSeverity reads a --fail-on value.
func ParseSeverity(s string) (Severity, error) {
	sev := Severity(strings.ToLower(s))
	if SeverityRank(sev) < 0 {
		return "", fmt.Errorf("unknown severity %q (valid: info, warning, error)", s)
	}
	return sev, nil
}

// Gate returns the findings at or above min.
func Gate(results []Result, min Severity) []Result {
	var out []Result
	for _, r := range results {
		if r.Status == Finding && SeverityRank(r.Severity) >= SeverityRank(min) {
			out = append(out, r)
		}
	}
	return out
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// suggest returns ` (did you mean "x"?)` for the closest candidate
// (knobs.Closest), or "".
func suggest(s string, candidates []string) string {
	if c := knobs.Closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}
