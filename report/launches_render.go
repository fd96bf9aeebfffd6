package report

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
)

var launchesTemplate = template.Must(template.New("launches").Parse(`<h2 id="launches">Every launch, step by step</h2>
<p class="muted">Open a trial for its launches, and a launch for rank 0's step time, the SM clock and the power of its first GPU over the launch:
the grey band is start-up and warm-up (before the measured window), the dashed line the window's end, red dots the samples where the software power cap held the clock down.
summary.json has the same data (trials[].launch_detail).</p>
<div class="launches">
{{range .}}{{$unit := .Unit}}<details class="trial-launches" data-trial="{{.T.ID}}"><summary><b>{{.Label}}</b> <code class="id">{{.T.ID}}</code> · {{.Summary}}</summary>
<div class="tablewrap"><table class="launch-table"><thead><tr><th>launch</th><th class="num">{{.Unit}}</th><th class="num">power-capped</th><th class="num">SM clock</th><th class="num">drift</th><th>note</th></tr></thead><tbody>
{{range .Launches}}<tr><td>{{.D.Repeat}}</td><td class="num">{{.Value}}</td><td class="num">{{.Capped}}</td><td class="num">{{.Clock}}</td><td class="num">{{.Drift}}</td><td class="wrap">{{.D.Excluded}}</td></tr>
{{end}}</tbody></table></div>
{{range .Launches}}<details class="launch" data-repeat="{{.D.Repeat}}"><summary>launch {{.D.Repeat}}: {{.Value}} {{$unit}}{{if .Note}} · {{.Note}}{{end}}</summary>
<div class="launch-figs">{{range .Figs}}<div class="card">{{.}}</div>{{end}}</div></details>
{{end}}</details>
{{end}}</div>
`))

type launchView struct {
	D                                 LaunchDetail
	Value, Capped, Clock, Drift, Note string
	Figs                              []template.HTML
}

type trialLaunchesView struct {
	T        *Trial
	Label    string
	Unit     string
	Summary  string
	Launches []launchView
}

// launchesHTML is the "Every launch, step by step" section: one expandable
// block per finished trial, one per launch inside with its three charts.
func launchesHTML(s *Summary) (template.HTML, error) {
	var views []trialLaunchesView
	for _, t := range okTrials(s) {
		if len(t.LaunchDetail) == 0 {
			continue
		}
		v := trialLaunchesView{T: t, Label: labelOf(t), Unit: s.Metric.Unit}
		var capLo, capHi, clkLo, clkHi float64
		for i, d := range t.LaunchDetail {
			lv := launchView{D: d, Value: "n/a", Capped: "n/a", Clock: "n/a", Drift: fmt.Sprintf("%+.1f%%", 100*d.Drift)}
			if d.Value > 0 {
				lv.Value = Num(d.Value)
			}
			if d.WindowEnd > 0 {
				lv.Capped = Percent(d.PowerCapped)
				if i == 0 || d.PowerCapped < capLo {
					capLo = d.PowerCapped
				}
				capHi = max(capHi, d.PowerCapped)
			}
			if d.SMClockMean > 0 {
				lv.Clock = fmt.Sprintf("%.0f MHz", d.SMClockMean)
				if clkLo == 0 || d.SMClockMean < clkLo {
					clkLo = d.SMClockMean
				}
				clkHi = max(clkHi, d.SMClockMean)
			}
			var notes []string
			if d.Excluded != "" {
				notes = append(notes, "left out: "+d.Excluded)
			}
			if d.PowerCapped > 0.005 {
				notes = append(notes, "power-capped "+Percent(d.PowerCapped)+" of the window")
			}
			lv.Note = strings.Join(notes, "; ")
			figs, err := launchFigures(t, d)
			if err != nil {
				return "", err
			}
			lv.Figs = figs
			v.Launches = append(v.Launches, lv)
		}
		v.Summary = nLaunches(len(t.LaunchDetail))
		if capHi > 0 || clkHi > 0 {
			v.Summary += fmt.Sprintf(" · power-capped %s of the window", rangeText(Percent(capLo), Percent(capHi)))
		}
		if clkHi > 0 {
			v.Summary += fmt.Sprintf(" · SM clock %s MHz", rangeText(fmt.Sprintf("%.0f", clkLo), fmt.Sprintf("%.0f", clkHi)))
		}
		views = append(views, v)
	}
	if len(views) == 0 {
		return "", nil
	}
	var buf bytes.Buffer
	if err := launchesTemplate.Execute(&buf, views); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // #nosec: html/template escaped every value; the SVGs are ours
}

// rangeText is "a" when both ends read alike, else "a–b".
func rangeText(a, b string) string {
	if a == b {
		return a
	}
	return a + "–" + b
}

// writeLaunchesMD writes report.md's per-launch table: every launch's value,
// power-capped share, SM clock and drift (the charts are in report.html).
func writeLaunchesMD(b *strings.Builder, s *Summary) {
	ok := okTrials(s)
	rows := 0
	for _, t := range ok {
		rows += len(t.LaunchDetail)
	}
	if rows == 0 {
		return
	}
	b.WriteString("## Every launch\n\n<details><summary>" + nLaunches(rows) + ": value, power cap, SM clock, drift</summary>\n\n")
	mdRow(b, []string{"trial", "launch", s.Metric.Unit, "power-capped", "SM clock MHz", "drift", "note"})
	mdRow(b, []string{"---", "---", "---", "---", "---", "---", "---"})
	for _, t := range ok {
		for _, d := range t.LaunchDetail {
			val, capped, clk := "n/a", "n/a", "n/a"
			if d.Value > 0 {
				val = Num(d.Value)
			}
			if d.WindowEnd > 0 {
				capped = Percent(d.PowerCapped)
			}
			if d.SMClockMean > 0 {
				clk = fmt.Sprintf("%.0f", d.SMClockMean)
			}
			mdRow(b, []string{labelOf(t) + " (" + t.ID + ")", fmt.Sprint(d.Repeat), val, capped, clk, fmt.Sprintf("%+.1f%%", 100*d.Drift), d.Excluded})
		}
	}
	b.WriteString("\n</details>\n\n")
}
