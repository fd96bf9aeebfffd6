package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
)

func init() { register(newModelsCommand) }

// modelPresets is every family and preset a study may name (engine.Models), in
// listing order. The engine's own list (cs_models) adds what it has beyond
// these; a family listed here that the engine lacks still gets rows, with the
// engine's error.
var modelPresets = engine.Models

// listedPresets merges the engine's families and presets into modelPresets:
// known families first in their order, the engine's presets after ours.
func listedPresets(fromEngine []engine.FamilyPresets) []engine.FamilyPresets {
	out := make([]engine.FamilyPresets, 0, len(modelPresets)+len(fromEngine))
	index := map[string]int{}
	for _, f := range modelPresets {
		index[f.Family] = len(out)
		out = append(out, engine.FamilyPresets{Family: f.Family, Presets: slices.Clone(f.Presets)})
	}
	for _, f := range fromEngine {
		i, ok := index[f.Family]
		if !ok {
			index[f.Family] = len(out)
			out = append(out, engine.FamilyPresets{Family: f.Family})
			i = len(out) - 1
		}
		for _, p := range f.Presets {
			if !slices.Contains(out[i].Presets, p) {
				out[i].Presets = append(out[i].Presets, p)
			}
		}
	}
	return out
}

// listingMicroBatch is the micro-batch the listing describes presets with.
// Facts are per sample and do not depend on it, but the engine validates it
// (a 1-image batch of resnet50 tiny leaves BatchNorm one value per channel).
const listingMicroBatch = 8

type modelsOptions struct {
	json bool
}

func newModelsCommand() *cobra.Command {
	var opts modelsOptions
	cmd := &cobra.Command{
		Use:   "models [family]",
		Short: "List model families and presets with parameters, FLOPs per sample and shapes",
		Long: "models asks the engine (cs_describe) for the static facts of every family and preset: " +
			"parameter count, training FLOPs per sample (forward + backward) and default shapes. " +
			"Nothing is trained and no device memory is used. A preset the engine cannot describe " +
			"shows the engine's error in its row.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			family := ""
			if len(args) == 1 {
				family = args[0]
			}
			return runModels(cmd.OutOrStdout(), engineLibFlag(cmd), family, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON instead of a table")
	return cmd
}

// modelRow is one preset in the listing: the engine's description or its error.
type modelRow struct {
	Family          string         `json:"family"`
	Preset          string         `json:"preset"`
	Params          int64          `json:"params,omitempty"`
	FLOPsPerSample  float64        `json:"flops_per_sample,omitempty"`
	TokensPerSample int            `json:"tokens_per_sample,omitempty"`
	Shapes          map[string]int `json:"shapes,omitempty"`
	Error           string         `json:"error,omitempty"`
}

type modelsListing struct {
	EngineLib string     `json:"engine_lib"`
	Models    []modelRow `json:"models"`
}

func runModels(w io.Writer, libFlag, family string, opts modelsOptions) error {
	path, err := engine.Discover(libFlag)
	if err != nil {
		return err
	}
	lib, err := binding.Load(path)
	if err != nil {
		return err
	}
	defer lib.Close()

	fromEngine, err := lib.Models()
	if err != nil && !errors.Is(err, engine.ErrUnsupported) {
		return err
	}
	presets := listedPresets(fromEngine)
	var families []string
	for _, f := range presets {
		families = append(families, f.Family)
	}
	if family != "" && !slices.Contains(families, family) {
		return exitcode.Usage(fmt.Errorf("unknown model family %q: want one of %s", family, strings.Join(families, ", ")))
	}

	listing := modelsListing{EngineLib: path}
	described := 0
	for _, f := range presets {
		if family != "" && f.Family != family {
			continue
		}
		for _, p := range f.Presets {
			row := modelRow{Family: f.Family, Preset: p}
			d, err := lib.Describe(engine.Config{Family: f.Family, Preset: p, MicroBatch: listingMicroBatch,
				Device: "cpu", Precision: "fp32", GradAccum: 1, Dist: engine.DistConfig{WorldSize: 1}})
			if err != nil {
				row.Error = err.Error()
			} else {
				// The micro-batch is this listing's choice, not the preset's.
				delete(d.Shapes, "micro_batch")
				row.Params, row.FLOPsPerSample, row.TokensPerSample, row.Shapes = d.Params, d.FLOPsPerSample, d.TokensPerSample, d.Shapes
				described++
			}
			listing.Models = append(listing.Models, row)
		}
	}
	if opts.json {
		if err := writeJSON(w, listing); err != nil {
			return err
		}
	} else if err := writeModelsTable(w, listing); err != nil {
		return err
	}
	if described == 0 {
		return fmt.Errorf("the engine at %s described none of the presets (see the errors above)", path)
	}
	return nil
}

func writeModelsTable(w io.Writer, l modelsListing) error {
	fmt.Fprintf(w, "engine: %s\n", l.EngineLib)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tPRESET\tPARAMS\tTRAIN FLOPS/SAMPLE\tTOKENS/SAMPLE\tSHAPES")
	for _, r := range l.Models {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\terror: %s\n", r.Family, r.Preset, r.Error)
			continue
		}
		tokens := "-"
		if r.TokensPerSample > 0 {
			tokens = strconv.Itoa(r.TokensPerSample)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Family, r.Preset, paramsText(r.Params),
			flopsText(r.FLOPsPerSample), tokens, shapesText(r.Shapes))
	}
	return tw.Flush()
}

// paramsText writes n with thousands separators: 124,439,808.
func paramsText(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// flopsText writes a FLOP count with an SI prefix: 764.8 GFLOP.
func flopsText(f float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P", "E"}
	i := 0
	for math.Abs(f) >= 1000 && i < len(prefixes)-1 {
		f /= 1000
		i++
	}
	return fmt.Sprintf("%.4g %sFLOP", f, prefixes[i])
}

// shapesText writes shapes as sorted key=value pairs.
func shapesText(shapes map[string]int) string {
	keys := slices.Sorted(maps.Keys(shapes))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, shapes[k])
	}
	return strings.Join(parts, " ")
}
