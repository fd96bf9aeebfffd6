package predict

import (
	"fmt"
	"strings"
)

// Reproduction is one published figure next to what the model says.
type Reproduction struct {
	Topology string
	Point    Published
	ModelBus float64 // the model's busbw, GB/s
	How      string  // the algorithm/protocol it chose
	Error    float64 // (model - published) / published
}

// Reproduce runs the NCCL model of every built-in topology on its published
// points (forcing the algorithm the measurement forced).
func Reproduce() ([]Reproduction, error) {
	var out []Reproduction
	for _, name := range Topologies() {
		t, err := LoadTopology(name)
		if err != nil {
			return nil, err
		}
		for _, p := range t.Published {
			m := NCCL{Topo: t, Algo: p.Algo}
			ms, how, err := m.Time(p.Op, p.Bytes, p.Ranks)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			bus := BusBW(p.Op, p.Bytes, p.Ranks, ms)
			out = append(out, Reproduction{Topology: name, Point: p, ModelBus: bus, How: how, Error: (bus - p.BusBW) / p.BusBW})
		}
	}
	return out, nil
}

// ReproductionTable is the Markdown table of Reproduce (docs/predict.md).
func ReproductionTable(rows []Reproduction) string {
	var b strings.Builder
	b.WriteString("| topology | op | GPUs | size | published busbw | model busbw | model's choice | error | asserted | source |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		asserted := "tabled only"
		if r.Point.Tolerance > 0 {
			asserted = fmt.Sprintf("within ±%.0f%%", 100*r.Point.Tolerance)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f GB/s | %.1f GB/s | %s | %+.1f%% | %s | %s |\n",
			r.Topology, r.Point.Op, r.Point.Ranks, sizeText(r.Point.Bytes), r.Point.BusBW, r.ModelBus, r.How,
			100*r.Error, asserted, r.Point.Source)
	}
	return b.String()
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
