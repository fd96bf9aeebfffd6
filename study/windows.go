package study

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Default floors of the warm-up and the measured window on a GPU, in
// seconds of wall clock: the H100's power limiter engages after 0.8-1.05 s
// of full load and cycles about every second, so 2 s of warm-up and a 5 s
// window measure the sustained state with under about 0.3% left from a
// partial cycle (../shared/brief/verdicts-review.md §3). On the CPU there is
// no limiter and tests stay fast: no floor unless the study sets one.
const (
	DefaultWarmupSeconds  = 2.0
	DefaultMeasureSeconds = 5.0
	maxWindowSeconds      = 3600.0
)

// Windows are the floors that apply on device ("cuda" or "cpu", as
// resolved): the study's, else the defaults on a GPU and none on the CPU.
func (w Workload) Windows(device string) (warmup, measure float64) {
	warmup, measure = w.WarmupSeconds, w.MeasureSeconds
	if warmup < 0 {
		warmup = 0
		if device == "cuda" {
			warmup = DefaultWarmupSeconds
		}
	}
	if measure < 0 {
		measure = 0
		if device == "cuda" {
			measure = DefaultMeasureSeconds
		}
	}
	return warmup, measure
}

// seconds reads a floor in seconds: a number from 0 (no floor) to 3600.
func (d *decoder) seconds(n *yaml.Node, field string) val[float64] {
	v := d.number(n, field)
	if !v.Bad && (v.V < 0 || v.V > maxWindowSeconds) {
		d.ps.add(v.Pos, "%s: %s is outside 0..%g seconds (0: no floor)", field, fmt.Sprint(v.V), maxWindowSeconds)
		v.Bad = true
	}
	return v
}
