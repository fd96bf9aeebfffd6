package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// CompareFormats are the output formats of casestudy compare.
var CompareFormats = []string{"text", "md", "html", "json"}

// WriteComparison renders c as text, md, html or json.
func WriteComparison(w io.Writer, c *Comparison, format string) error {
	switch format {
	case "text":
		return compareText(w, c)
	case "md":
		return compareMarkdown(w, c)
	case "html":
		return compareHTML(w, c)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(c)
	}
	return fmt.Errorf("unknown compare format %q: use text, md, html or json", format)
}

// method says how rows are decided, for the header of every format.
func (c *Comparison) method() string {
	hist := "no history: one launch a side cannot be judged"
	if c.History != "" {
		hist = fmt.Sprintf("history %s: %d comparable earlier runs (%d needed per trial) give a prediction interval at one launch a side "+
			"and add the between-run variance to the standard error", c.History, c.HistoryRuns, stats.MinHistory)
	}
	return fmt.Sprintf("%s over launches: NEW against OLD as the ratio of geometric means, %s Student t interval on log values (pooled variance: the same configuration on both sides); "+
		"verdicts against ±%s as in the report. Gate: per trial a one-sided %s test of \"NEW >= %s of OLD\", Holm over %d trials: "+
		"REGRESSION when it is rejected (or a trial that finished before fails now), PASS when the %s lower bound clears %s, "+
		"SUSPECTED when the estimate is below it unconfirmed, else UNDECIDED (so is a trial that finished in OLD or in NEW without a clean launch); "+
		"any SUSPECTED or UNDECIDED row, a trial that finished in OLD and is not in NEW, or no row tested makes the run INCONCLUSIVE; %s (threshold %s, %s)",
		c.Metric.Unit, stats.PercentText(c.Confidence), pctText(c.Threshold), stats.PercentText(stats.GateAlpha),
		stats.RatioText(1/(1+c.Threshold)), len(c.Rows), stats.PercentText(1-stats.GateAlpha), stats.RatioText(1/(1+c.Threshold)),
		hist, pctText(c.Threshold), c.ThresholdSource)
}

func pctText(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", 100*f), "0"), ".0") + "%"
}

// rowCells are the cells of one row: old, new, change with interval,
// verdict, p and launches, and benchstat's median change with its U test.
func rowCells(r CompareRow) (old, new, change, verdict, p, n, benchstat string) {
	val := func(v *stats.Value, o store.Outcome) string {
		if v == nil {
			return string(o)
		}
		return Num(v.Center)
	}
	old, new = val(r.Old, r.OldOutcome), val(r.New, r.NewOutcome)
	if r.Change == nil {
		return old, new, "", "", "", "", ""
	}
	ch := r.Change
	n = fmt.Sprintf("%d→%d", ch.NBase, ch.NTrial)
	if r.MannWhitney != nil {
		benchstat = fmt.Sprintf("%s (p=%.2f)", r.MannWhitney.Text, r.MannWhitney.P)
		if ch.NBase < 2 || ch.NTrial < 2 {
			benchstat = "n/a (one launch)"
		}
	}
	return old, new, ch.RatioText(), ch.VerdictText(), ch.PText(), n, benchstat
}

func rowStatus(r CompareRow) string {
	status := ""
	if r.Gate != nil && r.Gate.State != stats.GateNotJudged {
		status = strings.ToUpper(string(r.Gate.State))
	}
	if r.Improved {
		status = strings.TrimSpace(status + " improved")
	}
	return status
}

func compareText(w io.Writer, c *Comparison) error {
	fmt.Fprintf(w, "old: %s (%s %s, %s)\nnew: %s (%s %s, %s)\n%s\n\n",
		c.Old.Path, c.Old.Study, c.Old.RunID, c.Old.Kind, c.New.Path, c.New.Study, c.New.RunID, c.New.Kind, c.method())
	writeChangesText(w, c, "")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "trial\tknobs\t%s old\tnew\tnew/old\tverdict\tp\tlaunches\tbenchstat\tstatus\tnote\n", c.Metric.Unit)
	for _, r := range c.Rows {
		o, n, ch, v, p, nl, bs := rowCells(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Knobs, o, n, ch, v, p, nl, bs, rowStatus(r), r.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeCompareTail(w, c, "")
	_, err := fmt.Fprintf(w, "\n%s\n", c.Verdict)
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
	fmt.Fprintf(&b, "**%s**\n\n", mdEscape(c.Verdict))
	fmt.Fprintf(&b, "Old `%s` (%s) → new `%s` (%s). %s.\n\n",
		c.Old.RunID, c.Old.Kind, c.New.RunID, c.New.Kind, mdEscape(c.method()))
	writeChangesText(&b, c, "- ")
	mdRow(&b, []string{"trial", "knobs", c.Metric.Unit + " old", "new", "new/old", "verdict", "p", "launches", "benchstat", "status"})
	mdRow(&b, slicesRepeat("---", 10))
	for _, r := range c.Rows {
		o, n, ch, v, p, nl, bs := rowCells(r)
		status := rowStatus(r)
		if r.Note != "" {
			status = strings.TrimSpace(status + " " + r.Note)
		}
		mdRow(&b, []string{r.ID, r.Knobs, o, n, ch, v, p, nl, bs, status})
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
	"cells": func(r CompareRow) []string {
		o, n, ch, v, p, nl, bs := rowCells(r)
		return []string{o, n, ch, v, p, nl, bs}
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
<section class="card headline {{if .Regressions}}no_ok_trials{{else if eq .Gate "inconclusive"}}no_baseline{{end}}" id="headline"><div><p><b>{{.Verdict}}</b></p>
<p class="muted">{{.Method}}.</p></div></section>
{{.Blocks}}
<h2>Trials</h2>
<div class="tablewrap"><table>
<thead><tr><th>trial</th><th>knobs</th><th class="num">{{.Metric.Unit}} old</th><th class="num">new</th><th class="num">new/old</th><th>verdict</th><th class="num">p</th><th class="num">launches</th><th class="num">benchstat</th><th>status</th></tr></thead>
<tbody>{{range .Rows}}<tr>
<td><code>{{.ID}}</code></td><td>{{.Knobs}}</td>
{{range cells .}}<td class="num">{{.}}</td>{{end}}
<td class="wrap">{{with status .}}<b class="{{if eq . "REGRESSION"}}sev-error{{else if or (eq . "SUSPECTED") (eq . "UNDECIDED")}}sev-warning{{else}}sev-info{{end}}">{{.}}</b> {{end}}<span class="muted">{{.Note}}</span></td>
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
	blocks, err := compareBlocksHTML(c)
	if err != nil {
		return err
	}
	return compareTemplate.Execute(w, struct {
		*Comparison
		Method string
		CSS    template.CSS
		Blocks template.HTML
	}{c, c.method(), template.CSS(css), blocks}) // #nosec: our own embedded stylesheet
}
