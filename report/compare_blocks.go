package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"

	"gonum.org/v1/plot/vg"
)

// writeChangesText writes the "changed between runs" block of the text and
// Markdown outputs (bullet "- " for Markdown).
func writeChangesText(w io.Writer, c *Comparison, bullet string) {
	if len(c.Changed) == 0 {
		fmt.Fprintf(w, "changed between runs: nothing recorded (same casestudy commit, versions, driver, GPUs, host and study file)\n")
		if bullet != "" {
			fmt.Fprintln(w)
		}
		return
	}
	if bullet != "" {
		fmt.Fprintf(w, "**Changed between runs:**\n\n")
	} else {
		fmt.Fprintf(w, "changed between runs:\n")
	}
	for _, ch := range c.Changed {
		if bullet == "" {
			fmt.Fprintf(w, "  %s: %s → %s\n", ch.What, ch.Old, ch.New)
		} else {
			fmt.Fprintf(w, "%s%s: `%s` → `%s`\n", bullet, mdEscape(ch.What), ch.Old, ch.New)
		}
	}
	if bullet != "" {
		fmt.Fprintln(w)
	}
}

// compareChart is the ratio chart of compare's HTML: one row per compared
// trial, NEW/OLD with its interval, the line of no change at 1 and the
// regression line at 1/(1+threshold).
func compareChart(c *Comparison) (template.HTML, error) {
	var rows []CompareRow
	lo, hi := 1.0, 1.0
	for _, r := range c.Rows {
		if r.Change == nil || r.Change.Ratio <= 0 {
			continue
		}
		rows = append(rows, r)
		lo, hi = min(lo, r.Change.Ratio), max(hi, r.Change.Ratio)
		if r.Change.Bounded() {
			lo, hi = min(lo, r.Change.Lo), max(hi, r.Change.Hi)
		}
	}
	if len(rows) == 0 {
		return "", nil
	}
	reg := 1 / (1 + c.Threshold)
	lo, hi = min(lo, reg), max(hi, 1+c.Threshold)
	n := len(rows)
	labels := make([]string, n)
	for i, r := range rows {
		labels[n-1-i] = r.Knobs
	}
	p := newPlot("NEW / OLD per trial", fmt.Sprintf("%s, new over old (%s interval)", c.Metric.Unit, PercentConf(c.Confidence)), "")
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	pad := 0.05 * (hi - lo)
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.X.Tick.Marker = niceTicks{}
	f := &figure{p: p, w: chartWidth, h: vg.Length(n)*vg.Points(22) + 0.9*vg.Inch, label: "ratio of NEW to OLD per trial"}
	f.marks = append(f.marks,
		mark{shape: shapeSegment, class: "ref", x: 1, y: p.Y.Min, x2: 1, y2: p.Y.Max, stroke: colGrey, width: vg.Points(1), title: "no change"},
		mark{shape: shapeSegment, class: "ref threshold", x: reg, y: p.Y.Min, x2: reg, y2: p.Y.Max, stroke: colRed, width: vg.Points(1), dash: true,
			title: fmt.Sprintf("regression line: %s slower (1/(1+%s))", pctText(c.Threshold), pctText(c.Threshold))})
	for i, r := range rows {
		y := float64(n - 1 - i)
		ch := r.Change
		col := colGrey
		switch {
		case r.Regression:
			col = colRed
		case r.Improved:
			col = colGreen
		case ch.Decided():
			col = colBlue
		}
		tip := fmt.Sprintf("%s (%s): %s %s", r.Knobs, r.ID, ch.RatioText(), ch.VerdictText())
		attrs := [][2]string{{"data-trial", r.ID}, {"data-label", r.Knobs}}
		if ch.Bounded() {
			f.marks = append(f.marks, mark{shape: shapeWhisker, class: "mark interval", x: ch.Lo, y: y, x2: ch.Hi, y2: y,
				r: vg.Points(4), stroke: col, width: vg.Points(1.3), attrs: attrs, title: tip})
		}
		f.marks = append(f.marks, mark{shape: shapeCircle, class: "mark ratio", x: ch.Ratio, y: y, r: vg.Points(4), fill: col, attrs: attrs, title: tip})
	}
	f.legend = []legendItem{{text: "regression", shape: shapeCircle, fill: colRed}, {text: "improved", shape: shapeCircle, fill: colGreen},
		{text: "decided, within the threshold", shape: shapeCircle, fill: colBlue}, {text: "undecided", shape: shapeCircle, fill: colGrey},
		{text: "regression line", shape: shapeSegment, stroke: colRed, dash: true}}
	f.legendBelow = true
	return f.svg()
}

// compareBlocksHTML is the links to both reports, the ratio chart and the
// "changed between runs" block of compare's HTML.
func compareBlocksHTML(c *Comparison) (template.HTML, error) {
	chart, err := compareChart(c)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = compareBlocksTemplate.Execute(&b, struct {
		C     *Comparison
		Chart template.HTML
	}{c, chart})
	return template.HTML(b.String()), err // #nosec: html/template escaped every value
}

var compareBlocksTemplate = template.Must(template.New("compare-blocks").Parse(`<p class="links">{{with .C.Old.Report}}<a href="{{.}}">old report</a>{{else}}<span class="muted">old: no report.html next to it</span>{{end}} · {{with .C.New.Report}}<a href="{{.}}">new report</a>{{else}}<span class="muted">new: no report.html next to it</span>{{end}}</p>
<h2 id="changed">Changed between runs</h2>
{{if .C.Changed}}<div class="tablewrap"><table class="changed"><thead><tr><th>what</th><th>old</th><th>new</th></tr></thead><tbody>
{{range .C.Changed}}<tr><td>{{.What}}</td><td class="wrap"><code>{{.Old}}</code></td><td class="wrap"><code>{{.New}}</code></td></tr>
{{end}}</tbody></table></div>
{{else}}<p>Nothing recorded changed: the same casestudy commit, torch, CUDA, NCCL, driver, GPUs (by UUID), host and study file.</p>{{end}}
{{if .Chart}}<h2 id="ratios">Ratios</h2><figure id="fig-compare"><div class="card">{{.Chart}}</div><figcaption>Each trial's value in NEW over OLD with its interval; the dashed red line is the regression threshold, the grey one no change.</figcaption></figure>{{end}}
`))
