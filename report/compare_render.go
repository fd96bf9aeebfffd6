package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/casestudy/casestudy/stats"
)

// CompareFormats are the output formats of casestudy compare.
var CompareFormats = []string{"text", "md", "html"}

// WriteComparison renders c as text, md or html.
func WriteComparison(w io.Writer, c *Comparison, format string) error {
	switch format {
	case "text":
		return compareText(w, c)
	case "md":
		return compareMarkdown(w, c)
	case "html":
		return compareHTML(w, c)
	}
	return fmt.Errorf("unknown compare format %q: use text, md or html", format)
}

// Verdict is the one-line result: "no regression beyond 5%" or "2 regressions ...".
func (c *Comparison) Verdict() string {
	if len(c.Regressions) == 0 {
		return fmt.Sprintf("no regression beyond %s (%d trials compared, %d improved)",
			pctText(c.Threshold), len(c.Rows), len(c.Improvements))
	}
	return fmt.Sprintf("%d regression(s) beyond %s: %s", len(c.Regressions), pctText(c.Threshold), strings.Join(c.Regressions, ", "))
}

func pctText(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", 100*f), "0"), ".0") + "%"
}

// deltaCells are the old, new, change and p-value cells of one metric.
func deltaCells(d *stats.Delta) (old, new, change, p string) {
	if d == nil {
		return "—", "—", "", ""
	}
	return Num(d.Old), Num(d.New), d.Text, fmt.Sprintf("p=%.3f n=%d+%d", d.P, d.N1, d.N2)
}

func rowStatus(r CompareRow) string {
	switch {
	case r.Regression:
		return "REGRESSION"
	case r.Improved:
		return "improved"
	}
	return ""
}

func compareText(w io.Writer, c *Comparison) error {
	fmt.Fprintf(w, "old: %s (%s %s, %s)\nnew: %s (%s %s, %s)\nthreshold: %s (%s); changes marked ~ are not significant (Mann-Whitney U, alpha %.2f)\n\n",
		c.Old.Path, c.Old.Study, c.Old.RunID, c.Old.Kind, c.New.Path, c.New.Study, c.New.RunID, c.New.Kind,
		pctText(c.Threshold), c.ThresholdSource, stats.Alpha)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trial\tknobs\tsamples/s old\tnew\tΔ\t\tstep ms old\tnew\tΔ\tstatus\tnote")
	for _, r := range c.Rows {
		o, n, d, p := deltaCells(r.Throughput)
		so, sn, sd, _ := deltaCells(r.StepTime)
		if r.Throughput == nil {
			o, n = string(r.OldOutcome), string(r.NewOutcome)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Knobs, o, n, d, p, so, sn, sd, rowStatus(r), r.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeCompareTail(w, c, "")
	_, err := fmt.Fprintf(w, "\n%s\n", c.Verdict())
	return err
}

func writeCompareTail(w io.Writer, c *Comparison, bullet string) {
	if len(c.OnlyOld) > 0 {
		fmt.Fprintf(w, "\n%sonly in old (not compared): %s\n", bullet, strings.Join(c.OnlyOld, ", "))
	}
	if len(c.OnlyNew) > 0 {
		fmt.Fprintf(w, "\n%sonly in new (not compared): %s\n", bullet, strings.Join(c.OnlyNew, ", "))
	}
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "\n%swarning: %s\n", bullet, warn)
	}
}

func compareMarkdown(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## casestudy compare: %s\n\n", mdEscape(c.New.Study))
	fmt.Fprintf(&b, "**%s**\n\n", mdEscape(c.Verdict()))
	fmt.Fprintf(&b, "Old `%s` (%s) → new `%s` (%s). Regression: a significant throughput drop (Mann-Whitney U, α=%.2f) beyond %s (%s); `~` = not significant.\n\n",
		c.Old.RunID, c.Old.Kind, c.New.RunID, c.New.Kind, stats.Alpha, pctText(c.Threshold), c.ThresholdSource)
	mdRow(&b, []string{"trial", "knobs", "samples/s old", "new", "Δ", "p", "step ms old", "new", "Δ", "status"})
	mdRow(&b, slicesRepeat("---", 10))
	for _, r := range c.Rows {
		o, n, d, p := deltaCells(r.Throughput)
		so, sn, sd, _ := deltaCells(r.StepTime)
		status := rowStatus(r)
		if r.Note != "" {
			status = strings.TrimSpace(status + " " + r.Note)
		}
		if r.Throughput == nil {
			o, n = string(r.OldOutcome), string(r.NewOutcome)
		}
		mdRow(&b, []string{r.ID, r.Knobs, o, n, d, p, so, sn, sd, status})
	}
	writeCompareTail(&b, c, "- ")
	_, err := io.WriteString(w, b.String())
	return err
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

var compareTemplate = template.Must(template.New("compare").Funcs(template.FuncMap{
	"cells": func(d *stats.Delta) []string {
		o, n, ch, p := deltaCells(d)
		return []string{o, n, ch, p}
	},
	"status": rowStatus,
	"pct":    pctText,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.New.Study}} · casestudy compare</title>
<style>{{.CSS}}</style></head>
<body><main>
<h1>{{.New.Study}}: compare</h1>
<p class="sub">old <code>{{.Old.RunID}}</code> ({{.Old.Kind}}, {{.Old.Created}}) → new <code>{{.New.RunID}}</code> ({{.New.Kind}}, {{.New.Created}})</p>
<section class="card headline {{if .Regressions}}no_ok_trials{{end}}" id="headline"><div><p><b>{{.Verdict}}</b></p>
<p class="muted">A regression is a significant throughput drop (Mann-Whitney U, α=0.05) beyond {{pct .Threshold}} ({{.ThresholdSource}}), or a trial that finished before and fails now. ~ marks changes that are not significant.</p></div></section>
<h2>Trials</h2>
<div class="tablewrap"><table>
<thead><tr><th>trial</th><th>knobs</th><th class="num">samples/s old</th><th class="num">new</th><th class="num">Δ</th><th class="num">p</th><th class="num">step ms old</th><th class="num">new</th><th class="num">Δ</th><th>status</th></tr></thead>
<tbody>{{range .Rows}}<tr>
<td><code>{{.ID}}</code></td><td>{{.Knobs}}</td>
{{if .Throughput}}{{range cells .Throughput}}<td class="num">{{.}}</td>{{end}}{{else}}<td class="num"><span class="badge o-{{.OldOutcome}}">{{.OldOutcome}}</span></td><td class="num"><span class="badge o-{{.NewOutcome}}">{{.NewOutcome}}</span></td><td></td><td></td>{{end}}
{{if .StepTime}}{{$c := cells .StepTime}}<td class="num">{{index $c 0}}</td><td class="num">{{index $c 1}}</td><td class="num">{{index $c 2}}</td>{{else}}<td></td><td></td><td></td>{{end}}
<td class="wrap">{{with status .}}<b class="{{if eq . "REGRESSION"}}sev-error{{else}}sev-info{{end}}">{{.}}</b> {{end}}<span class="muted">{{.Note}}</span></td>
</tr>{{end}}</tbody></table></div>
{{if .OnlyOld}}<p>Only in old (not compared): {{range .OnlyOld}}<code>{{.}}</code> {{end}}</p>{{end}}
{{if .OnlyNew}}<p>Only in new (not compared): {{range .OnlyNew}}<code>{{.}}</code> {{end}}</p>{{end}}
{{range .Warnings}}<p class="sev-warning">warning: {{.}}</p>{{end}}
<footer>old: {{.Old.Path}} · new: {{.New.Path}}</footer>
</main></body></html>
`))

func compareHTML(w io.Writer, c *Comparison) error {
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return err
	}
	return compareTemplate.Execute(w, struct {
		*Comparison
		Verdict string
		CSS     template.CSS
	}{c, c.Verdict(), template.CSS(css)}) // #nosec: our own embedded stylesheet
}
