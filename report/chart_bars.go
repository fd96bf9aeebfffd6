package report

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot/vg"
)

// barPart is one segment of a (stacked) horizontal bar.
type barPart struct {
	name string
	col  color.Color
	get  func(*Trial) float64
}

// barFigure draws one horizontal bar per trial, first trial at the top,
// labelled by the knob values it changes; parts stack left to right.
func barFigure(title, xlabel string, trials []*Trial, parts []barPart, tip func(*Trial, barPart, float64) string) *figure {
	n := len(trials)
	labels := make([]string, n)
	for i, t := range trials {
		labels[n-1-i] = barLabel(t)
	}
	p := newPlot(title, xlabel, "")
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	f := &figure{p: p, w: chartWidth, h: vg.Length(n)*vg.Points(21) + 0.9*vg.Inch, label: title}
	used := map[string]bool{}
	top := 0.0
	for i, t := range trials {
		y := float64(n - 1 - i)
		x := 0.0
		for _, part := range parts {
			v := part.get(t)
			if v <= 0 {
				continue
			}
			used[part.name] = true
			f.marks = append(f.marks, mark{shape: shapeRect, class: "mark bar", x: x, y: y - 0.3, x2: x + v, y2: y + 0.3,
				fill: part.col, attrs: trialAttrs(t, [2]string{"data-part", part.name}, [2]string{"data-value", fmt.Sprint(v)}),
				title: tip(t, part, v)})
			x += v
		}
		top = max(top, x)
	}
	p.X.Min, p.X.Max = 0, 1.04*max(top, 1e-9)
	p.X.Tick.Marker = niceTicks{}
	if len(parts) > 1 {
		for _, part := range parts {
			if used[part.name] {
				f.legend = append(f.legend, legendItem{text: part.name, shape: shapeRect, fill: part.col})
			}
		}
		f.legendBelow = true
	}
	return f
}

// barLabel is a trial's knob values, starred when it is the best.
func barLabel(t *Trial) string {
	if t.Best {
		return labelOf(t) + " ★"
	}
	return labelOf(t)
}

// breakdownChart: the time per sample split like the median step, one
// stacked bar per trial, so that trials with different micro-batches or GPU
// counts compare (a step of micro-batch 32 is longer than one of 8; a sample
// is not).
func breakdownChart(s *Summary, ok []*Trial) (*Chart, error) {
	var trials []*Trial
	perSample := map[*Trial]float64{} // ms of the whole job per sample over ms of rank 0's median step
	maxMS := 0.0
	for _, t := range ok {
		if t.Breakdown != nil && t.StepMS.Median > 0 && t.Throughput.Center > 0 {
			trials = append(trials, t)
			ms := 1000 / t.Throughput.Center
			perSample[t] = ms / t.StepMS.Median
			maxMS = max(maxMS, ms)
		}
	}
	if len(trials) == 0 {
		return nil, nil
	}
	unit, scale := "ms", 1.0
	if maxMS < 1 {
		unit, scale = "µs", 1000
	}
	part := func(name string, col color.Color, get func(*Breakdown) float64) barPart {
		return barPart{name, col, func(t *Trial) float64 { return scale * perSample[t] * get(t.Breakdown) }}
	}
	parts := []barPart{
		part("forward", colBlue, func(b *Breakdown) float64 { return b.ForwardMS }),
		part("backward", colSky, func(b *Breakdown) float64 { return b.BackwardMS }),
		part("optimizer", colGreen, func(b *Breakdown) float64 { return b.OptimizerMS }),
		part("exposed comm", colRed, func(b *Breakdown) float64 { return b.ExposedCommMS }),
		part("pipeline bubble", colPurple, func(b *Breakdown) float64 { return b.BubbleMS }),
		part("other", colGrey, func(b *Breakdown) float64 { return b.OtherMS }),
	}
	for _, g := range profileGroups {
		name := g.name
		parts = append(parts, part(name, g.col, func(b *Breakdown) float64 { return b.kernelPart(name) }))
	}
	parts = append(parts, part("device idle (profile)", colIdle, func(b *Breakdown) float64 { return b.IdleMS }))
	f := barFigure("Time per sample, split like the step", unit+" per sample (1 / throughput)", trials, parts,
		func(t *Trial, p barPart, v float64) string {
			return fmt.Sprintf("%s (%s): %s %s %s per sample (%s of the step)", labelOf(t), t.ID, p.name, Num(v), unit,
				Percent(v/(scale*1000/t.Throughput.Center)))
		})
	notSplit := noteUnsplit(f, trials)
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	caption := ""
	if notSplit > 0 {
		caption = fmt.Sprintf(" %d bar(s) replay a CUDA graph without a profile: %s.", notSplit, GraphNotSplit)
	}
	if anySplit(trials, SplitProfile) {
		caption += " Graphed trials that were profiled are split by their kernel profile: the device-busy share of the step by kernel category, and the time the device idled."
	}
	return &Chart{ID: "breakdown", Title: "Time per sample", SVG: svg,
		Caption: "Each bar is the time per sample of the whole job (1 / throughput, so trials with different micro-batches " +
			"or GPU counts compare), split in the shares of rank 0's median step: exposed comm is communication not hidden " +
			"behind compute; other is the step minus the named parts (data loading, launch gaps, synchronisation). Hover for the shares." + caption}, nil
}

// efficiencyChart: MFU of every trial against one peak, the dense bf16
// tensor-core peak of the GPU; achieved TFLOP/s when no peak is known.
func efficiencyChart(s *Summary, ok []*Trial) (*Chart, error) {
	if pk := s.MFUPeak; pk != nil {
		var trials []*Trial
		for _, t := range ok {
			if t.MFUBF16 > 0 {
				trials = append(trials, t)
			}
		}
		if len(trials) == 0 {
			return nil, nil
		}
		title := fmt.Sprintf("MFU against the %s's dense bf16 peak", shortGPU(pk.Device))
		f := barFigure(title, fmt.Sprintf("%% of %s TFLOP/s per GPU (%s)", Num(pk.TFLOPS), MFUBasis), trials,
			[]barPart{{"MFU", colGreen, func(t *Trial) float64 { return 100 * t.MFUBF16 }}},
			func(t *Trial, _ barPart, v float64) string {
				tip := fmt.Sprintf("%s (%s): %s%% of the bf16 peak, %s TFLOP/s per GPU", labelOf(t), t.ID, Num(v), Num(t.TFLOPS))
				if t.MFU > 0 {
					tip += fmt.Sprintf("; %s of the peak at its own precision (%s)", Percent(t.MFU), precisionOf(t))
				}
				return tip
			})
		svg, err := f.svg()
		if err != nil {
			return nil, err
		}
		return &Chart{ID: "mfu", Title: "MFU", SVG: svg,
			Caption: fmt.Sprintf("Achieved model TFLOP/s per GPU (model FLOPs per sample, recomputation not counted) over one peak for every trial: "+
				"the %s's dense bf16 tensor-core peak, %s TFLOP/s, so that precisions compare. Hover for the MFU against the peak at the trial's own precision.",
				pk.Device, Num(pk.TFLOPS))}, nil
	}
	var trials []*Trial
	for _, t := range ok {
		if t.TFLOPS > 0 {
			trials = append(trials, t)
		}
	}
	if len(trials) == 0 {
		return nil, nil
	}
	f := barFigure("Achieved TFLOP/s per trial", "TFLOP/s per GPU (model FLOPs)", trials,
		[]barPart{{"TFLOP/s", colGreen, func(t *Trial) float64 { return t.TFLOPS }}},
		func(t *Trial, _ barPart, v float64) string {
			return fmt.Sprintf("%s (%s): %s TFLOP/s per GPU", labelOf(t), t.ID, Num(v))
		})
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "mfu", Title: "TFLOP/s", SVG: svg,
		Caption: "MFU is not shown: the device's peak TFLOP/s is not known (CPU runs, GPUs outside the engine's table)."}, nil
}

// memoryChart: the memory each trial holds (reserved by the caching
// allocator, max over ranks), split into peak allocated and the rest (the
// CUDA graph pool under graphs, the allocator's cache). Trials whose memory
// is unknown are named in the caption with why (report/memory.go).
func memoryChart(s *Summary, ok []*Trial) (*Chart, error) {
	var trials []*Trial
	var unknown []string
	for _, t := range ok {
		switch {
		case t.Held() > 0:
			trials = append(trials, t)
		case t.Memory != nil && t.Memory.NA != naCPU:
			unknown = append(unknown, fmt.Sprintf("%s: %s", labelOf(t), t.Memory.NA))
		}
	}
	if len(trials) == 0 {
		return nil, nil
	}
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	f := barFigure("Memory held per trial", "GiB (reserved by the caching allocator, max over ranks)", trials,
		[]barPart{
			{"peak allocated", colSky, func(t *Trial) float64 { return gib(min(t.Memory.PeakAllocatedBytes, t.Memory.HeldBytes)) }},
			{"graph pool and cache", colOrange, func(t *Trial) float64 { return gib(t.Memory.PoolAndCacheBytes) }},
		},
		func(t *Trial, _ barPart, v float64) string {
			text := fmt.Sprintf("%s (%s): %s", labelOf(t), t.ID, memTip(t))
			if t.OptimStateBytes > 0 {
				text += fmt.Sprintf(", %s of optimizer states", memText(t.OptimStateBytes))
			}
			return text
		})
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	caption := "What each trial holds on the GPU: the peak the caching allocator reserved in a step, the maximum over ranks. " +
		"Peak allocated counts live tensors; the rest is a captured CUDA graph's private pool (graphs=true) and the allocator's cache. " +
		"Under CUDA graphs peak allocated alone stays flat whatever the micro-batch, so it is never shown as the trial's need."
	if len(unknown) > 0 {
		caption += " Not shown: " + strings.Join(unknown, "; ") + "."
	}
	return &Chart{ID: "memory", Title: "Memory held", SVG: svg, Caption: caption}, nil
}

// shortGPU is "H200" for "NVIDIA H200".
func shortGPU(name string) string { return strings.TrimPrefix(name, "NVIDIA ") }

// precisionOf is the trial's precision knob, "its precision" when absent.
func precisionOf(t *Trial) string {
	if p := t.Knobs["precision"]; p != "" {
		return p
	}
	return "its precision"
}
