package study

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader and the planner: they may
// refuse the input, never panic or hang. The seed corpus (the shipped studies
// and hostile inputs) runs as part of go test.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../studies/*.yaml")
	more, _ := filepath.Glob("../studies/*/*.yaml")
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		bertExample,
		"",
		"---\n---\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nbaseline: &b {x: *b}\n",
		"a: &a [*a]\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nsweep: {strategy: grid, knobs: {precision: [fp32, bf16]}, constraints: ['!(precision == fp16) && ranks >= 1']}\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nsweep: {strategy: greedy, knobs: {grad_accum: [1, 2]}}\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nsweep: {strategy: list, trials: [{precision: bf16}], exclude: [{precision: bf16}]}\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 2}\nextends: x.yaml\n",
		"baseline: " + strings.Repeat("[", 100) + "\n",
		"name: !!binary aGVsbG8=\nmodel: {family: !!int 3}\n",
		"? [a, b]\n: c\n",
		"name: x\nmodel: {family: gpt, preset: tiny}\nbaseline: {<<: {precision: bf16}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "studies")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "f.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path, LoadOptions{MaxBytes: 64 << 10})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if _, err := Expand(s, ExpandOptions{MaxTrials: 200}); err == nil && s.Sweep.Strategy == "greedy" {
			g, err := NewGreedy(s)
			if err != nil {
				return
			}
			for _, trials, done := g.Next(); !done; _, trials, done = g.Next() {
				_ = g.Choose(trials[len(trials)-1].ID)
			}
		}
	})
}
