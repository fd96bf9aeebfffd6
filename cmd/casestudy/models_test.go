package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/study"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestModelsBadInput(t *testing.T) {
	tests := []struct {
		description string
		args        []string
		code        int
		stderr      []string
	}{
		{"too many arguments", []string{"models", "gpt", "bert"}, exitcode.Input, []string{"accepts at most 1 arg"}},
		{"missing library", []string{"models", "--engine-lib", filepath.Join(t.TempDir(), "none.so")}, exitcode.Environment,
			[]string{"none.so", "--engine-lib", "make engine"}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			assert.Equal(t, tt.code, code)
			assert.Empty(t, stdout)
			for _, s := range tt.stderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

func TestModelsListsEveryPreset(t *testing.T) {
	lib := engineLibOrSkip(t)
	code, stdout, stderr := runCLI(t, "models", "--json", "--engine-lib", lib)
	require.Equal(t, 0, code, "stderr: %s", stderr)

	var listing modelsListing
	require.NoError(t, json.Unmarshal([]byte(stdout), &listing))
	assert.Equal(t, lib, listing.EngineLib)

	byName := map[string]modelRow{}
	for _, r := range listing.Models {
		byName[r.Family+"/"+r.Preset] = r
	}
	for _, fam := range study.Families { // every family and preset a study may name
		f := engine.FamilyPresets{Family: fam, Presets: study.Presets[fam]}
		for _, p := range f.Presets {
			r, ok := byName[f.Family+"/"+p]
			require.True(t, ok, "%s/%s missing from the listing", f.Family, p)
			if r.Error != "" {
				// Only a family the engine does not have yet may fail, and then
				// with the engine's own text.
				assert.NotEqual(t, "gpt", f.Family, "gpt must be described: %s", r.Error)
				assert.Contains(t, r.Error, "engine cs_describe")
				continue
			}
			assert.Positive(t, r.Params, "%s/%s", f.Family, p)
			assert.Positive(t, r.FLOPsPerSample, "%s/%s", f.Family, p)
			assert.NotEmpty(t, r.Shapes, "%s/%s", f.Family, p)
		}
	}
	// The published GPT-2 sizes (tied embeddings, 1024 positions).
	for preset, params := range map[string]int64{"124m": 124_439_808, "350m": 354_823_168, "774m": 774_030_080, "1.5b": 1_557_611_200} {
		assert.Equal(t, params, byName["gpt/"+preset].Params, "gpt %s", preset)
		// Training FLOPs per sample are at least 6·N per token.
		r := byName["gpt/"+preset]
		assert.GreaterOrEqual(t, r.FLOPsPerSample, 6*float64(params)*float64(r.TokensPerSample), "gpt %s", preset)
	}

	code, stdout, stderr = runCLI(t, "models", "gpt", "--engine-lib", lib)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "124,439,808")
	assert.Contains(t, stdout, "FLOP")
	assert.NotContains(t, stdout, "bert")
}

func TestModelsUnknownFamily(t *testing.T) {
	lib := engineLibOrSkip(t)
	code, stdout, stderr := runCLI(t, "models", "gtp", "--engine-lib", lib)
	assert.Equal(t, exitcode.Input, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `unknown model family "gtp": want one of gpt, bert, resnet50`)
}

func TestListedPresets(t *testing.T) {
	got := listedPresets([]engine.FamilyPresets{
		{Family: "bert", Presets: []string{"tiny", "base", "large", "xl"}},
		{Family: "vit", Presets: []string{"b16"}},
	})
	want := []engine.FamilyPresets{
		{Family: "gpt", Presets: []string{"tiny", "124m", "350m", "774m", "1.5b"}},
		{Family: "bert", Presets: []string{"tiny", "base", "large", "xl"}},
		{Family: "resnet50", Presets: []string{"tiny", "50"}},
		{Family: "vit", Presets: []string{"b16"}},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, modelPresets, listedPresets(nil), "no engine list: ours")
}

func TestModelsFormatting(t *testing.T) {
	assert.Equal(t, "124,439,808", paramsText(124439808))
	assert.Equal(t, "999", paramsText(999))
	assert.Equal(t, "1,000", paramsText(1000))
	assert.Equal(t, "764.8 GFLOP", flopsText(764.8e9))
	assert.Equal(t, "12 FLOP", flopsText(12))
	assert.Equal(t, "heads=12 layers=12", shapesText(map[string]int{"layers": 12, "heads": 12}))
}
