package engine

import "slices"

// Models is every model family the engine trains and its presets, in listing
// order. The engine library is the source of truth (cs_models; the presets are
// defined in engine/native/src/gpt.cpp, bert.cpp and resnet.cpp): this copy
// lets a study be validated and models be listed without loading the library,
// and TestModelsMatchLibrary (engine/binding) fails when the two differ.
var Models = []FamilyPresets{
	{Family: "gpt", Presets: []string{"tiny", "124m", "350m", "774m", "1.5b"}},
	{Family: "bert", Presets: []string{"tiny", "base", "large"}},
	{Family: "resnet50", Presets: []string{"tiny", "50"}},
}

// Families lists the families of Models in order.
func Families() []string {
	out := make([]string, len(Models))
	for i, f := range Models {
		out[i] = f.Family
	}
	return out
}

// Presets lists a family's presets (nil for a family the engine lacks).
func Presets(family string) []string {
	for _, f := range Models {
		if f.Family == family {
			return slices.Clone(f.Presets)
		}
	}
	return nil
}
