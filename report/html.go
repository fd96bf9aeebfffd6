package report

import (
	"embed"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/course"
	"github.com/casestudy/casestudy/stats"
)

//go:embed assets/report.html.tmpl assets/profiles.html.tmpl assets/report.css assets/report.js
var assets embed.FS

var htmlTemplate = template.Must(template.New("report.html.tmpl").Funcs(funcs).Funcs(profilesTemplateFuncs).
	ParseFS(assets, "assets/report.html.tmpl", "assets/profiles.html.tmpl"))

var funcs = template.FuncMap{
	"num":      Num,
	"si":       SI,
	"interval": Interval,
	"pctRange": PctRange,
	"ratio":    Ratio,
	"percent":  Percent,
	"mem":      memText,
	"mfu":      mfuText,
	"join":     strings.Join,
	"ciWidth":  ciWidth,
	"cite":     course.Cite,
	"conf":     PercentConf,
	"launches": launchesText,
	"nLaunch":  nLaunches, // "1 launch", "5 launches"
	"memHeld":  memHeldText,
	"memTip":   memTip,
	"memNote":  func() string { return memoryNote },
}

type outcomeCount struct {
	Outcome string
	N       int
}

type htmlData struct {
	S           *Summary
	Charts      []Chart
	Rows        []tableRow
	Versus      bool   // the baseline finished: show each trial against it
	VersusTip   string // what the vs-baseline column holds
	NotOK       []*Trial
	Dropped     [][2]string        // combination, reason
	Findings    []checklist.Result // only status "finding"
	Warnings    []string
	Counts      []outcomeCount
	Prov        [][2]string
	Setup       string
	Fixed       []string      // "knob=value" shared by every trial
	Tokens      bool          // some trial counts tokens and the metric is not tokens/s: a tokens/s column
	ShowSamples bool          // the metric is not samples/s: a samples/s column
	Method      string        // how the numbers and verdicts are computed
	Profiles    *profilesView // the kernel-mix section (profiles_render.go); nil without profiles
	CSS         template.CSS
	JS          template.JS
	Timeline    template.HTML // report/timeline.go
	Measured    template.HTML // report/measured_render.go
	Launches    template.HTML // report/launches_render.go
	Intervals   string        // why two intervals for one ratio (report/intervals.go)
	NCCL        template.HTML // report/nccl.go
	Predicted   template.HTML // report/predicted.go
}

// WriteHTML writes report.html: one self-contained page (inline CSS, SVG
// charts and a little JavaScript; no network fetches). Every text from the
// run is escaped by html/template.
func WriteHTML(w io.Writer, s *Summary) error {
	charts, err := Charts(s)
	if err != nil {
		return err
	}
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return err
	}
	js, err := assets.ReadFile("assets/report.js")
	if err != nil {
		return err
	}
	d := htmlData{S: s, Charts: charts, NotOK: notOKTrials(s), Warnings: allWarnings(s),
		Prov: provenanceRows(s), Setup: SetupLine(&s.Provenance), Method: strings.TrimSpace(MethodText(s) + " " + PowerText(s)),
		CSS: template.CSS(css), JS: template.JS(js)} // #nosec: our own embedded assets
	d.Rows, d.Versus, d.VersusTip = tableRows(s)
	for _, dr := range s.Dropped {
		d.Dropped = append(d.Dropped, [2]string{droppedLabel(s, dr.Knobs), dr.Reason})
	}
	if d.Profiles, err = newProfilesView(s); err != nil {
		return err
	}
	for _, t := range s.Trials {
		d.Tokens = d.Tokens || (t.TokensPerS > 0 && s.Metric.Unit != "tokens/s")
	}
	d.ShowSamples = s.Metric.Unit != "samples/s"
	if d.Timeline, err = timelineHTML(s); err != nil {
		return err
	}
	d.NCCL = ncclHTML(s.NCCL)
	if d.Predicted, err = predictedHTML(s); err != nil {
		return err
	}
	if d.Measured, err = measuredHTML(s); err != nil {
		return err
	}
	d.Intervals = intervalNote(s)
	if d.Launches, err = launchesHTML(s); err != nil {
		return err
	}
	fixed := fixedKnobs(s)
	for _, k := range slices.Sorted(maps.Keys(fixed)) {
		d.Fixed = append(d.Fixed, k+"="+fixed[k])
	}
	for _, f := range s.Findings {
		if f.Status == checklist.Finding {
			d.Findings = append(d.Findings, f)
		}
	}
	for _, o := range slices.Sorted(maps.Keys(s.Counts)) {
		d.Counts = append(d.Counts, outcomeCount{o, s.Counts[o]})
	}
	slices.SortStableFunc(d.Counts, func(a, b outcomeCount) int { // ok first
		return boolInt(b.Outcome == "ok") - boolInt(a.Outcome == "ok")
	})
	return htmlTemplate.Execute(w, d)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ciWidth is the relative half-width of the interval as a sort key; "" when
// unbounded (sorted last).
func ciWidth(e stats.Value) string {
	if !e.Bounded() || e.Center == 0 {
		return ""
	}
	return strconv.FormatFloat(math.Max(e.Hi/e.Center-1, 1-e.Lo/e.Center), 'g', 6, 64)
}
