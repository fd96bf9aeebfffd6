package binding

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPresetShapesMatchLibrary: engine.ShapeOf, the Go copy of the
// transformer presets' heads and vocabulary that the planner's tensor-parallel
// rules read (knobs.Check), is what the library builds (cs_describe), for
// every gpt and bert preset and for a model.hidden override of each family.
func TestPresetShapesMatchLibrary(t *testing.T) {
	lib := realLibrary(t)
	type tc struct {
		family, preset string
		layers, hidden int
	}
	var cases []tc
	for _, f := range engine.Models {
		for _, p := range f.Presets {
			cases = append(cases, tc{f.Family, p, 0, 0})
		}
	}
	cases = append(cases, tc{"gpt", "tiny", 3, 128}, tc{"bert", "tiny", 1, 256})
	for _, c := range cases {
		want, ok := engine.ShapeOf(c.family, c.preset, c.layers, c.hidden)
		if c.family == "resnet50" {
			assert.False(t, ok, "resnet50 has no heads")
			continue
		}
		require.True(t, ok, "%s %s missing from engine/shapes.go", c.family, c.preset)
		d, err := lib.Describe(engine.Config{Family: c.family, Preset: c.preset, Layers: c.layers, Hidden: c.hidden,
			MicroBatch: 1, Device: "cpu", Precision: "fp32"})
		require.NoError(t, err, "%s %s", c.family, c.preset)
		got := engine.PresetShape{Layers: d.Shapes["layers"], Hidden: d.Shapes["hidden"], Heads: d.Shapes["heads"], Vocab: d.Shapes["vocab"]}
		assert.Equal(t, want, got, "engine/shapes.go and the library differ for %s %s (layers %d, hidden %d): change both", c.family, c.preset, c.layers, c.hidden)
	}
}
