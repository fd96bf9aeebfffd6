package report

import (
	"bytes"
	"fmt"
	"html/template"
	"path/filepath"
	"strings"

	"github.com/casestudy/casestudy/store"
)

var measuredTemplate = template.Must(template.New("measured").Parse(`<section class="card measured" id="measured">
<h2>What was measured</h2>
<p class="subtitle">{{.W.Subtitle}}</p>
<dl class="prov">{{range .Rows}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>
{{end}}</dl>
{{if .W.Caveats}}<div class="caveats"><b>Before adopting a winner:</b><ul>{{range .W.Caveats}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
{{with .W.Confirm}}<details class="confirm"><summary>Suggested confirmation study: the decided winners combined (<a href="{{.File}}">{{.File}}</a>, next to this report)</summary>
<pre>{{.YAML}}</pre></details>{{end}}
{{if .Study}}<details><summary>The study file as run</summary><pre>{{.Study}}</pre></details>{{end}}
</section>
`))

// measuredHTML is the "What was measured" block of report.html.
func measuredHTML(s *Summary) (template.HTML, error) {
	if s.Measured == nil {
		return "", nil
	}
	var buf bytes.Buffer
	err := measuredTemplate.Execute(&buf, struct {
		W     *Measured
		Rows  [][2]string
		Study string
	}{s.Measured, s.Measured.rows(), s.studyText})
	if err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // #nosec: html/template escaped every value
}

// writeMeasuredMD writes the block into report.md.
func writeMeasuredMD(b *strings.Builder, w *Measured) {
	if w == nil {
		return
	}
	b.WriteString("## What was measured\n\n")
	fmt.Fprintf(b, "*%s*\n\n", mdEscape(w.Subtitle))
	for _, r := range w.rows() {
		fmt.Fprintf(b, "- **%s**: %s\n", r[0], mdEscape(r[1]))
	}
	b.WriteString("\n")
	if len(w.Caveats) > 0 {
		b.WriteString("**Before adopting a winner:**\n\n")
		for _, c := range w.Caveats {
			fmt.Fprintf(b, "- %s\n", mdEscape(c))
		}
		b.WriteString("\n")
	}
	if c := w.Confirm; c != nil {
		fmt.Fprintf(b, "Suggested confirmation study, the decided winners combined (`%s`, next to this report):\n\n"+
			"<details><summary>%s</summary>\n\n```yaml\n%s```\n\n</details>\n\n", c.File, c.File, c.YAML)
	}
}

// writeConfirm writes the suggested confirmation study next to the report
// (outDir), its relative extends made relative to outDir. It returns the
// path written, "" when the report suggests none.
func writeConfirm(s *Summary, run *store.Run, outDir string) (string, error) {
	if s.Measured == nil || s.Measured.Confirm == nil {
		return "", nil
	}
	m := &run.Manifest
	c := confirmOf(s, s.Measured, m.StudyText, m.StudyPath, outDir)
	if c == nil {
		return "", nil
	}
	s.Measured.Confirm = c
	p := filepath.Join(outDir, c.File)
	return p, store.WriteFileAtomic(p, []byte(c.YAML))
}
