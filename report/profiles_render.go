package report

import (
	"fmt"
	"html/template"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/casestudy/casestudy/internal/units"
	"github.com/casestudy/casestudy/profile"
)

// categoryColours gives each category of the kernel-mix chart its colour;
// idle is light grey.
var categoryColours = map[string]color.Color{
	profile.GEMM:          colBlue,
	profile.Convolution:   colSky,
	profile.Attention:     color.RGBA{86, 100, 180, 255},
	profile.BatchNorm:     colOrange,
	profile.LayerNorm:     color.RGBA{240, 200, 60, 255},
	profile.Softmax:       color.RGBA{170, 120, 40, 255},
	profile.Elementwise:   colGreen,
	profile.Reduction:     color.RGBA{0, 110, 80, 255},
	profile.Copy:          color.RGBA{120, 90, 70, 255},
	profile.Optimizer:     colPurple,
	profile.Communication: colRed,
	profile.PipelineWait:  color.RGBA{110, 40, 120, 255},
	profile.Other:         colGrey,
}

var colIdle = color.RGBA{215, 215, 215, 255}

// profileChart: one stacked bar per profiled trial: each category's time per
// step, then the idle time.
func profileChart(ps *Profiles) (*Chart, error) {
	trials := ps.profiledTrials()
	if len(trials) == 0 {
		return nil, nil
	}
	labels := make([]string, len(trials))
	var maxStack float64
	for i, tp := range trials {
		labels[i] = tp.ID
		if tp.Baseline {
			labels[i] += " (base)"
		}
		maxStack = max(maxStack, tp.Profile.KernelMS+tp.Profile.IdleMS)
	}
	p := newPlot("Where the step's time went", "ms per step (profiled steps, rank 0)", "")
	p.NominalY(labels...)
	var below *plotter.BarChart
	add := func(name string, col color.Color, get func(*profile.Summary) float64) error {
		vals := make(plotter.Values, len(trials))
		for i, tp := range trials {
			vals[i] = get(tp.Profile)
		}
		bc, err := plotter.NewBarChart(vals, barWidth(len(trials)))
		if err != nil {
			return err
		}
		bc.Horizontal, bc.Color, bc.LineStyle.Width = true, col, 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		return nil
	}
	for _, cat := range ps.Categories {
		col, ok := categoryColours[cat]
		if !ok {
			col = colGrey
		}
		if err := add(cat, col, func(s *profile.Summary) float64 { return s.MS(cat) }); err != nil {
			return nil, err
		}
	}
	if err := add("idle", colIdle, func(s *profile.Summary) float64 { return s.IdleMS }); err != nil {
		return nil, err
	}
	p.X.Min = 0
	p.X.Max = 1.04 * maxStack
	p.X.Tick.Marker = niceTicks{}
	svg, err := renderSVG(p, chartWidth, barHeight(len(trials)), "Kernel time per category and idle time per trial")
	if err != nil {
		return nil, err
	}
	what := "CUDA kernel time"
	if trials[0].Profile.Device != "cuda" {
		what = "CPU operator self time"
	}
	return &Chart{ID: "profile", Title: "Where the step's time went", SVG: svg,
		Caption: "Per trial, " + what + " per step by category (profiled steps after the measured ones, rank 0, " +
			"mean over launches), then the idle time: the step less the time the device was busy. Categories add up " +
			"to more than the busy time where streams overlap (communication under compute)."}, nil
}

// profilesView is what the HTML template's profiles section shows.
type profilesView struct {
	P      *Profiles
	Chart  *Chart
	Legend []legendItem // the chart's colours, in stacking order (an HTML legend keeps the bars close)
	Rows   []profileRow
}

type legendItem struct{ Name, Colour string }

// legend is the chart's colour key: the categories present, then idle.
func legend(ps *Profiles) []legendItem {
	var out []legendItem
	for _, c := range ps.Categories {
		col, ok := categoryColours[c]
		if !ok {
			col = colGrey
		}
		out = append(out, legendItem{c, hexColour(col)})
	}
	return append(out, legendItem{"idle", hexColour(colIdle)})
}

func hexColour(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
}

type profileRow struct {
	Label    string
	P        *profile.Summary
	Top      []profile.CategoryTime // the largest categories
	Traces   []traceView
	Errors   []string
	Baseline bool
}

type traceView struct {
	Label, Href, Size string
}

func newProfilesView(ps *Profiles) (*profilesView, error) {
	if ps == nil {
		return nil, nil
	}
	ch, err := profileChart(ps)
	if err != nil {
		return nil, err
	}
	v := &profilesView{P: ps, Chart: ch, Legend: legend(ps)}
	for i := range ps.Trials {
		tp := &ps.Trials[i]
		r := profileRow{Label: tp.label(), P: tp.Profile, Errors: tp.Errors, Baseline: tp.Baseline}
		if tp.Profile != nil {
			r.Top = topCategories(tp.Profile, 4)
		}
		for _, tr := range tp.Traces {
			r.Traces = append(r.Traces, traceView{Label: fmt.Sprintf("r%d rank %d", tr.Repeat, tr.Rank),
				Href: ps.link(tr.Path), Size: units.Bytes(tr.Bytes)})
		}
		v.Rows = append(v.Rows, r)
	}
	return v, nil
}

func topCategories(p *profile.Summary, n int) []profile.CategoryTime {
	if len(p.Categories) < n {
		return p.Categories
	}
	return p.Categories[:n]
}

// writeProfilesMD writes the kernel-mix section of report.md.
func writeProfilesMD(b *strings.Builder, ps *Profiles) {
	if ps == nil {
		return
	}
	b.WriteString("## Where the time went (kernel profiles)\n\n")
	trials := ps.profiledTrials()
	if len(trials) > 0 {
		p0 := trials[0].Profile
		fmt.Fprintf(b, "Profiled steps after the measured ones (knob `profile`), rank 0, mean over launches; times are %s "+
			"per step. Idle is the step less the time the %s was busy: a large share means the step waits for the host "+
			"(launch-bound). The profiler's cost here: profiled steps %s slower than the measured ones, %s s more per launch.\n\n",
			p0.Time, map[bool]string{true: "GPU", false: "host"}[p0.Device == "cuda"],
			pct(ps.OverheadShare), Num(ps.ExtraWallMS/1e3))
		cols := []string{"trial", "step ms", "busy ms", "idle", "kernels/step"}
		cols = append(cols, ps.Categories...)
		mdRow(b, cols)
		mdRow(b, slices.Repeat([]string{"---"}, len(cols)))
		for _, tp := range trials {
			p := tp.Profile
			row := []string{tp.label(), Num(stepOf(p)), Num(p.BusyMS), pct(p.IdleShare), fmt.Sprintf("%.0f", p.KernelsPerStep)}
			for _, c := range ps.Categories {
				if ms := p.MS(c); ms > 0 {
					row = append(row, fmt.Sprintf("%s (%s)", Num(ms), pct(p.Share(c))))
				} else {
					row = append(row, "–")
				}
			}
			mdRow(b, row)
		}
		b.WriteString("\nCategory cells: ms per step (share of the kernel time).\n\n")
	}
	if len(ps.Changes) > 0 {
		b.WriteString("### What each knob changed in the kernel mix\n\n")
		for _, c := range ps.Changes {
			fmt.Fprintf(b, "- `%s` (trial %s vs baseline %s): %s\n", mdEscape(c.Knob+"="+c.Value), c.Trial, c.Baseline,
				mdEscape(strings.Join(c.Deltas, "; ")))
		}
		b.WriteString("\n")
	}
	for _, tp := range trials {
		p := tp.Profile
		fmt.Fprintf(b, "<details><summary>%s: top kernels</summary>\n\n", mdEscape(tp.label()))
		mdRow(b, []string{"ms/step", "share", "calls/step", "category", "kernel"})
		mdRow(b, slices.Repeat([]string{"---"}, 5))
		for _, k := range p.Top {
			mdRow(b, []string{Num(k.MS), pct(k.Share), fmt.Sprintf("%.3g", k.Calls), k.Category, k.Name})
		}
		b.WriteString("\n</details>\n\n")
	}
	var traces, errs []string
	for _, tp := range ps.Trials {
		for _, tr := range tp.Traces {
			traces = append(traces, fmt.Sprintf("[%s r%d rank %d](%s) (%s)", tp.ID, tr.Repeat, tr.Rank,
				strings.ReplaceAll(ps.link(tr.Path), " ", "%20"), units.Bytes(tr.Bytes)))
		}
		for _, e := range tp.Errors {
			errs = append(errs, fmt.Sprintf("- %s: %s\n", tp.ID, mdEscape(e)))
		}
	}
	if len(errs) > 0 {
		b.WriteString("Launches without a profile or trace (their measurements stand):\n\n" + strings.Join(errs, "") + "\n")
	}
	if len(traces) > 0 {
		b.WriteString("Traces (open in https://ui.perfetto.dev or chrome://tracing): " + strings.Join(traces, " · ") + "\n\n")
	}
}

// profilesTemplateFuncs are the helpers the profiles template uses.
var profilesTemplateFuncs = template.FuncMap{
	"pct":    pct,
	"stepOf": stepOf,
}
