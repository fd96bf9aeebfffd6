// Package profile turns what the engine's profiler measured after a launch's
// steps (engine.Profile: per-kernel totals, the device's busy time, overlap
// with other streams) into where a step's time went: GPU busy and idle time,
// time by category of kernel, the top kernels and how much communication hid
// behind compute (Summary, stored as store.RankRecord.Profile). The report's
// kernel-mix section and the checklist's profile rules read it.
package profile

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
)

// categoriesJSON is the category table shared with bench/reference/kernels.py.
//
//go:embed categories.json
var categoriesJSON []byte

// Names of the categories the report and the checklist single out.
const (
	PipelineWait  = "pipeline wait"
	Communication = "communication"
	Optimizer     = "optimizer"
	Attention     = "attention"
	Convolution   = "convolution"
	BatchNorm     = "batchnorm"
	LayerNorm     = "layernorm"
	Softmax       = "softmax/cross-entropy"
	Pooling       = "pooling"
	GEMM          = "gemm/matmul"
	Copy          = "copy/memset"
	Reduction     = "reduction"
	Elementwise   = "elementwise"
	Other         = "other"
)

// Rule is one row of the table: a kernel or operator whose name matches
// Pattern (anywhere) belongs to Name, unless an earlier row matched.
type Rule struct {
	Name    string `json:"name"`
	Why     string `json:"why"`
	Pattern string `json:"pattern"`
	re      *regexp.Regexp
}

var rules = mustRules(categoriesJSON)

func mustRules(b []byte) []Rule {
	rs, err := parseRules(b)
	if err != nil {
		panic("profile: categories.json: " + err.Error())
	}
	return rs
}

func parseRules(b []byte) ([]Rule, error) {
	var doc struct {
		Categories []Rule `json:"categories"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range doc.Categories {
		r := &doc.Categories[i]
		if seen[r.Name] {
			return nil, fmt.Errorf("category %q is listed twice", r.Name)
		}
		seen[r.Name] = true
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("category %q: %v", r.Name, err)
		}
		r.re = re
	}
	if n := len(doc.Categories); n == 0 || doc.Categories[n-1].Pattern != "" {
		return nil, fmt.Errorf("the last category must be the catch-all (empty pattern)")
	}
	return doc.Categories, nil
}

// Category is the category of a kernel or operator name (first match).
func Category(name string) string {
	for _, r := range rules {
		if r.re.MatchString(name) {
			return r.Name
		}
	}
	return Other
}

// Rules returns the table in matching order.
func Rules() []Rule { return rules }

// IsNormalisation reports whether a category is a normalisation layer's.
func IsNormalisation(category string) bool { return category == BatchNorm || category == LayerNorm }
