package engine

// PresetShape is the part of a transformer preset's shape the planner needs
// without loading the engine library: what tensor parallelism splits
// (attention heads, the vocabulary) and what the per-rank memory estimate
// scales with. The library is the source of truth (gpt.cpp's presets(),
// bert.cpp's shape_of); TestPresetShapesMatchLibrary (engine/binding) fails
// when the two differ.
type PresetShape struct {
	Layers, Hidden, Heads, Vocab int
}

// presetShapes are GPT-2's and BERT's presets (resnet50 has no heads).
var presetShapes = map[string]map[string]PresetShape{
	"gpt": {
		"tiny": {Layers: 2, Hidden: 64, Heads: 4, Vocab: 256},
		"124m": {Layers: 12, Hidden: 768, Heads: 12, Vocab: 50257},
		"350m": {Layers: 24, Hidden: 1024, Heads: 16, Vocab: 50257},
		"774m": {Layers: 36, Hidden: 1280, Heads: 20, Vocab: 50257},
		"1.5b": {Layers: 48, Hidden: 1600, Heads: 25, Vocab: 50257},
	},
	"bert": {
		"tiny":  {Layers: 2, Hidden: 128, Heads: 2, Vocab: 1024},
		"base":  {Layers: 12, Hidden: 768, Heads: 12, Vocab: 30522},
		"large": {Layers: 24, Hidden: 1024, Heads: 16, Vocab: 30522},
	},
}

// ShapeOf is the shape of family's preset with a study's model.layers and
// model.hidden overrides (0: the preset's), as the engine builds it: a GPT
// hidden override keeps the head size (more heads), a BERT one keeps the
// heads. ok is false for a family without heads (resnet50) or an unknown
// preset.
func ShapeOf(family, preset string, layers, hidden int) (s PresetShape, ok bool) {
	s, ok = presetShapes[family][preset]
	if !ok {
		return PresetShape{}, false
	}
	if layers > 0 {
		s.Layers = layers
	}
	if hidden > 0 {
		if family == "gpt" {
			s.Heads = hidden / (s.Hidden / s.Heads)
		}
		s.Hidden = hidden
	}
	return s, true
}
