package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// TimelineSection is the report's "Where the time went": the launch
// timelines of the run added up by phase (timeline.Summarize) and, for a run
// with --overlap aa, the A/A comparison of overlap.
type TimelineSection struct {
	*timeline.Study
	AA *timeline.AA `json:"overlap_aa,omitempty"`
}

// TimelineOf is the section of a run (the A/A limit from its compare
// threshold); nil when its records have no timelines (recorded before them).
func TimelineOf(run *store.Run) *TimelineSection {
	st := timeline.Summarize(run)
	if st == nil {
		return nil
	}
	threshold := run.Manifest.CompareThreshold
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	return &TimelineSection{Study: st, AA: timeline.CompareOverlap(run, threshold)}
}

// groupColors are the chart's colours of timeline.Groups.
var groupColors = map[string]color.Color{
	timeline.GroupRunner: colGrey, timeline.GroupProcess: colPurple, timeline.GroupLoad: colOrange,
	timeline.GroupCreate: colRed, timeline.GroupFirstStep: colSky, timeline.GroupWarmup: colBlue,
	timeline.GroupMeasured: colGreen, timeline.GroupTeardown: color.RGBA{240, 228, 66, 255},
}

// timelineChart is a stacked bar per trial: seconds of its launches by group.
func timelineChart(t *TimelineSection) (template.HTML, error) {
	trials := t.Trials
	labels := make([]string, len(trials))
	groups := make([]map[string]float64, len(trials))
	maxStack := 0.0
	for i, tr := range trials {
		labels[i] = tr.ID
		groups[i] = map[string]float64{}
		for _, g := range timeline.ByGroup(tr.Phases) {
			groups[i][g.Name] = g.MS / 1000
		}
		maxStack = max(maxStack, tr.WallMS/1000)
	}
	p := newPlot("Where each trial's launches spent their time", "seconds, all launches of the trial", "")
	p.NominalY(labels...)
	var below *plotter.BarChart
	for _, g := range timeline.Groups {
		vals := make(plotter.Values, len(trials))
		any := false
		for i := range trials {
			vals[i] = groups[i][g]
			any = any || vals[i] > 0
		}
		if !any {
			continue
		}
		bc, err := plotter.NewBarChart(vals, barWidth(len(trials)))
		if err != nil {
			return "", err
		}
		bc.Horizontal, bc.Color, bc.LineStyle.Width = true, groupColors[g], 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(g, bc)
	}
	p.X.Min, p.X.Max = 0, 1.35*maxStack // room for the legend on the right
	p.X.Tick.Marker = niceTicks{}
	p.Legend.Top, p.Legend.Left = true, false
	return renderSVG(p, chartWidth, barHeight(len(trials))+0.6*vg.Inch, "Launch time per trial by phase")
}

// shareText is "43%" of part in whole.
func shareText(part, whole float64) string {
	if whole <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

// timelineLines are the section's sentences: the run's wall time and measured
// share, what was hidden by overlap, when steps settled, the A/A verdict.
func timelineLines(t *TimelineSection) []string {
	lines := []string{fmt.Sprintf("%d launches took %s of wall time; their measured steps %s: %s of it.",
		t.Launches, timeline.Seconds(t.WallMS), timeline.Seconds(t.MeasuredMS), shareText(t.MeasuredMS, t.WallMS))}
	if t.HiddenMS >= 1 {
		lines = append(lines, fmt.Sprintf("Launches prepared ahead ran %s alongside their predecessors (not counted twice in the wall time).",
			timeline.Seconds(t.HiddenMS)))
	}
	if st := t.Settle; st != nil {
		s := fmt.Sprintf("Step times settled by step %d at the latest (median %d) with %d warm-up steps", st.Max, st.Median, st.WarmupSteps)
		if st.Late > 0 {
			s += fmt.Sprintf("; %d of %d launches settled only after the warm-up: their first measured steps were still warming up", st.Late, st.Launches)
		} else {
			s += fmt.Sprintf(": every one of %d launches settled within the warm-up", st.Launches)
		}
		lines = append(lines, s+".")
	}
	if a := t.AA; a != nil {
		lines = append(lines, fmt.Sprintf("Overlap A/A test (±%.1f%% = half the compare threshold): %s. A preparation ran at most %.0f ms inside a measured window.",
			100*a.Limit, a.Verdict, a.MaxInWindowMS))
		for _, c := range a.Comparisons {
			lines = append(lines, "  "+c.String())
		}
	}
	return lines
}

// writeTimelineMD writes "## Where the time went".
func writeTimelineMD(b *strings.Builder, t *TimelineSection) {
	if t == nil {
		return
	}
	b.WriteString("## Where the time went\n\n")
	for _, l := range timelineLines(t) {
		fmt.Fprintf(b, "%s\n", mdEscape(strings.TrimSpace(l)))
	}
	b.WriteString("\n")
	mdRow(b, []string{"phase", "total", "share of wall", "per launch"})
	mdRow(b, []string{"---", "---:", "---:", "---:"})
	for _, p := range t.Phases {
		mdRow(b, []string{p.Name, timeline.Seconds(p.MS), shareText(p.MS, t.WallMS), timeline.Seconds(p.MS / float64(t.Launches))})
	}
	b.WriteString("\n")
	cols := append([]string{"trial", "launches", "wall"}, timeline.Groups...)
	mdRow(b, cols)
	mdRow(b, append([]string{"---"}, strings.Split(strings.Repeat("---:,", len(cols)-1), ",")[:len(cols)-1]...))
	for _, tr := range t.Trials {
		mdRow(b, trialGroupRow(tr))
	}
	b.WriteString("\n")
}

func trialGroupRow(tr timeline.Trial) []string {
	ms := map[string]float64{}
	for _, g := range timeline.ByGroup(tr.Phases) {
		ms[g.Name] = g.MS
	}
	row := []string{tr.ID, fmt.Sprint(tr.Launches), timeline.Seconds(tr.WallMS)}
	for _, g := range timeline.Groups {
		row = append(row, timeline.Seconds(ms[g]))
	}
	return row
}

var timelineTemplate = template.Must(template.New("timeline").Parse(`<h2 id="time">Where the time went</h2>
<div class="card">{{range .Lines}}<p>{{.}}</p>{{end}}</div>
<figure id="fig-timeline"><div class="card">{{.Chart}}</div><figcaption>Each trial's launches added up by phase group: runner (commits, scheduling, preparation, collection), processes (spawn, rendezvous, waits, barrier), engine library load, engine creation, the first step, the other warm-up steps, the measured steps, teardown and exit. Only the measured steps measure anything.</figcaption></figure>
<div class="tablewrap"><table>
<thead><tr><th>phase</th><th class="num">total</th><th class="num">share of wall</th><th class="num">per launch</th></tr></thead>
<tbody>{{range .Rows}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td><td class="num">{{index . 2}}</td><td class="num">{{index . 3}}</td></tr>
{{end}}</tbody></table></div>
`))

// timelineHTML renders the section for report.html ("" without timelines).
func timelineHTML(t *TimelineSection) (template.HTML, error) {
	if t == nil {
		return "", nil
	}
	chart, err := timelineChart(t)
	if err != nil {
		return "", err
	}
	d := struct {
		Lines []string
		Chart template.HTML
		Rows  [][]string
	}{Lines: timelineLines(t), Chart: chart}
	for _, p := range t.Phases {
		d.Rows = append(d.Rows, []string{p.Name, timeline.Seconds(p.MS), shareText(p.MS, t.WallMS), timeline.Seconds(p.MS / float64(t.Launches))})
	}
	var buf bytes.Buffer
	if err := timelineTemplate.Execute(&buf, d); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // #nosec: html/template escaped every value
}

// WriteTimelineText writes the section for a terminal (casestudy timeline).
func WriteTimelineText(w io.Writer, study string, t *TimelineSection) error {
	if t == nil {
		_, err := fmt.Fprintf(w, "%s: no launch timelines (the run was recorded before casestudy kept them)\n", study)
		return err
	}
	fmt.Fprintf(w, "study %s\n", study)
	for _, l := range timelineLines(t) {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttotal\tshare\tper launch\t")
	for _, p := range t.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", p.Name, timeline.Seconds(p.MS), shareText(p.MS, t.WallMS), timeline.Seconds(p.MS/float64(t.Launches)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(append([]string{"trial", "launches", "wall"}, timeline.Groups...), "\t")+"\t")
	for _, tr := range t.Trials {
		fmt.Fprintln(tw, strings.Join(trialGroupRow(tr), "\t")+"\t")
	}
	return tw.Flush()
}
