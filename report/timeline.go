package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// TimelineSection is the report's "Where the launch time went": the launch
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
	timeline.GroupMeasured: colGreen, timeline.GroupProfile: colDark, timeline.GroupTeardown: color.RGBA{240, 228, 66, 255},
}

// timelineChart is a stacked bar per trial (labelled like every other bar
// chart, by the knobs it changes): seconds of its launches by group.
func timelineChart(s *Summary) (template.HTML, error) {
	byID := map[string]*Trial{}
	for i := range s.Trials {
		byID[s.Trials[i].ID] = &s.Trials[i]
	}
	var trials []*Trial
	seconds := map[*Trial]map[string]float64{}
	for _, tr := range s.Timeline.Trials {
		t := byID[tr.ID]
		if t == nil {
			continue
		}
		trials = append(trials, t)
		seconds[t] = map[string]float64{}
		for _, g := range timeline.ByGroup(tr.Phases) {
			seconds[t][g.Name] = g.MS / 1000
		}
	}
	if len(trials) == 0 {
		return "", nil
	}
	var parts []barPart
	for _, g := range timeline.Groups {
		parts = append(parts, barPart{g, groupColors[g], func(t *Trial) float64 { return seconds[t][g] }})
	}
	f := barFigure("Where each trial's launches spent their time", "seconds, all launches of the trial", trials, parts,
		func(t *Trial, p barPart, v float64) string {
			return fmt.Sprintf("%s (%s): %s %s s", labelOf(t), t.ID, p.name, Num(v))
		})
	f.label = "Launch time per trial by phase"
	svg, err := f.svg()
	return svg, err
}

// usedGroups are the phase groups that took time in some trial.
func usedGroups(t *TimelineSection) []string {
	used := map[string]bool{}
	for _, tr := range t.Trials {
		for _, g := range timeline.ByGroup(tr.Phases) {
			used[g.Name] = used[g.Name] || g.MS > 0
		}
	}
	var out []string
	for _, g := range timeline.Groups {
		if used[g] {
			out = append(out, g)
		}
	}
	return out
}

// shareText is "43%" of part in whole.
func shareText(part, whole float64) string {
	if whole <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

// theirOrIts is the possessive of n launches.
func theirOrIts(n int) string {
	if n == 1 {
		return "its"
	}
	return "their"
}

// timelineLines are the section's sentences: the run's wall time and measured
// share, what was hidden by overlap, when steps settled, the A/A verdict.
func timelineLines(t *TimelineSection) []string {
	lines := []string{fmt.Sprintf("%s took %s of wall time; %s measured steps %s: %s of it.",
		nLaunches(t.Launches), timeline.Seconds(t.WallMS), theirOrIts(t.Launches), timeline.Seconds(t.MeasuredMS), shareText(t.MeasuredMS, t.WallMS))}
	if t.HiddenMS >= 1 {
		lines = append(lines, fmt.Sprintf("Launches prepared ahead ran %s alongside their predecessors (not counted twice in the wall time).",
			timeline.Seconds(t.HiddenMS)))
	}
	if st := t.Settle; st != nil {
		s := fmt.Sprintf("Step times settled by step %d at the latest (median %d) with %d warm-up steps", st.Max, st.Median, st.WarmupSteps)
		if st.Late > 0 {
			s += fmt.Sprintf("; %d of %s settled only after the warm-up: their first measured steps were still warming up", st.Late, nLaunches(st.Launches))
		} else if st.Launches == 1 {
			s += ": the one launch settled within the warm-up"
		} else {
			s += fmt.Sprintf(": every one of %d launches settled within the warm-up", st.Launches)
		}
		lines = append(lines, s+".")
		if st.SlowedLater > 0 { // after settling: not warm-up
			l := fmt.Sprintf("%d of %s slowed down later in their measured window, after settling", st.SlowedLater, nLaunches(st.Launches))
			if st.PowerLimited > 0 {
				l += fmt.Sprintf(": power limit engaged, SM clock −%.1f%% (mean of the %d power-capped %s)", 100*st.ClockDeficit, st.PowerLimited, launchesWord(st.PowerLimited))
			} else {
				l += " (no power-cap counters recorded: the cause is not known)"
			}
			lines = append(lines, l+".")
		}
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

// writeTimelineMD writes "## Where the launch time went".
func writeTimelineMD(b *strings.Builder, t *TimelineSection) {
	if t == nil {
		return
	}
	b.WriteString("## Where the launch time went\n\n")
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
	groups := usedGroups(t)
	cols := append([]string{"trial", "launches", "wall"}, groups...)
	mdRow(b, cols)
	mdRow(b, append([]string{"---"}, strings.Split(strings.Repeat("---:,", len(cols)-1), ",")[:len(cols)-1]...))
	for _, tr := range t.Trials {
		mdRow(b, trialGroupRow(tr, groups))
	}
	b.WriteString("\n")
}

func trialGroupRow(tr timeline.Trial, groups []string) []string {
	ms := map[string]float64{}
	for _, g := range timeline.ByGroup(tr.Phases) {
		ms[g.Name] = g.MS
	}
	row := []string{tr.ID, fmt.Sprint(tr.Launches), timeline.Seconds(tr.WallMS)}
	for _, g := range groups {
		row = append(row, timeline.Seconds(ms[g]))
	}
	return row
}

var timelineTemplate = template.Must(template.New("timeline").Parse(`<h2 id="time">Where the launch time went</h2>
<div class="card">{{range .Lines}}<p>{{.}}</p>{{end}}</div>
<figure id="fig-timeline"><div class="card">{{.Chart}}</div><figcaption>Each trial's launches added up by phase group: runner (commits, scheduling, preparation, collection), processes (spawn, rendezvous, waits, barrier), engine library load, engine creation, the first step, the other warm-up steps, the measured steps, the profiled steps (knob profile), teardown and exit. Only the measured steps measure anything.</figcaption></figure>
<div class="tablewrap"><table>
<thead><tr><th>phase</th><th class="num">total</th><th class="num">share of wall</th><th class="num">per launch</th></tr></thead>
<tbody>{{range .Rows}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td><td class="num">{{index . 2}}</td><td class="num">{{index . 3}}</td></tr>
{{end}}</tbody></table></div>
`))

// timelineHTML renders the section for report.html ("" without timelines).
func timelineHTML(s *Summary) (template.HTML, error) {
	t := s.Timeline
	if t == nil {
		return "", nil
	}
	chart, err := timelineChart(s)
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
	groups := usedGroups(t)
	fmt.Fprintln(tw, strings.Join(append([]string{"trial", "launches", "wall"}, groups...), "\t")+"\t")
	for _, tr := range t.Trials {
		fmt.Fprintln(tw, strings.Join(trialGroupRow(tr, groups), "\t")+"\t")
	}
	return tw.Flush()
}
