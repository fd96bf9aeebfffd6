package report

import (
	"fmt"
	"html/template"
	"image/color"
	"slices"
	"strings"

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
	profile.Pooling:       color.RGBA{150, 150, 90, 255},
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
// step, then the idle time. The bars are labelled by the trials' knob values.
func profileChart(s *Summary, ps *Profiles) (*Chart, error) {
	profiled := ps.profiledTrials()
	if len(profiled) == 0 {
		return nil, nil
	}
	byID := map[string]*Trial{}
	for i := range s.Trials {
		byID[s.Trials[i].ID] = &s.Trials[i]
	}
	summaries := map[*Trial]*profile.Summary{}
	var trials []*Trial
	for _, tp := range profiled {
		if t := byID[tp.ID]; t != nil {
			trials = append(trials, t)
			summaries[t] = tp.Profile
		}
	}
	if len(trials) == 0 {
		return nil, nil
	}
	var parts []barPart
	for _, cat := range ps.Categories {
		col, ok := categoryColours[cat]
		if !ok {
			col = colGrey
		}
		parts = append(parts, barPart{cat, col, func(t *Trial) float64 { return summaries[t].MS(cat) }})
	}
	parts = append(parts, barPart{"idle", colIdle, func(t *Trial) float64 { return summaries[t].IdleMS }})
	f := barFigure("Where the step's time went", "ms per step (profiled steps, rank 0)", trials, parts,
		func(t *Trial, p barPart, v float64) string {
			return fmt.Sprintf("%s (%s): %s %s ms per step", labelOf(t), t.ID, p.name, Num(v))
		})
	f.label = "Kernel time per category and idle time per trial" // what a screen reader says; the title is short
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	what := "CUDA kernel time"
	if profiled[0].Profile.Device != "cuda" {
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
	Legend []colourKey // the chart's colours, in stacking order (an HTML legend keeps the bars close)
	Rows   []profileRow
}

type colourKey struct{ Name, Colour string }

// legend is the chart's colour key: the categories present, then idle.
func legend(ps *Profiles) []colourKey {
	var out []colourKey
	for _, c := range ps.Categories {
		col, ok := categoryColours[c]
		if !ok {
			col = colGrey
		}
		out = append(out, colourKey{c, hexColour(col)})
	}
	return append(out, colourKey{"idle", hexColour(colIdle)})
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

func newProfilesView(s *Summary) (*profilesView, error) {
	ps := s.Profiles
	if ps == nil {
		return nil, nil
	}
	ch, err := profileChart(s, ps)
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
