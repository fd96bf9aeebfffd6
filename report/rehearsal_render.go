package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/casestudy/casestudy/store"
)

// The renderers of a rehearsal's summary (report/rehearsal.go): markdown,
// HTML and the lines `casestudy run` prints. Every one opens with the label
// "rehearsal, not a measurement" and says why.

// rehearsalLines are the section's facts per trial, as label: text pairs,
// shared by every renderer.
func rehearsalLines(t *RehearsalTrial) [][2]string {
	var out [][2]string
	add := func(k, v string) { out = append(out, [2]string{k, v}) }
	layout := fmt.Sprintf("%d ranks: data parallel %d x %d stages, micro-batch %d per rank", t.Ranks, t.DataPar, t.Stages, t.MicroBatch)
	if t.TensorPar > 1 {
		layout = fmt.Sprintf("%d ranks: tensor parallel %d x data parallel %d x %d stages, micro-batch %d per data-parallel rank",
			t.Ranks, t.TensorPar, t.DataPar, t.Stages, t.MicroBatch)
	}
	if t.RanksPerGPU > 0 {
		layout += fmt.Sprintf("; up to %d ranks per GPU (%s)", t.RanksPerGPU, strings.Join(t.Devices, ","))
	}
	add("layout", layout)
	ran := "ran"
	if t.Outcome != store.OK {
		ran = "did not run: " + t.Error
	}
	add("ran", ran)
	if m := t.Memory; m != nil && m.PeakBytes == 0 && m.Method != "" {
		v := m.Method
		if m.EstimateBytes > 0 {
			v += fmt.Sprintf("; plan-time estimate %s", rhGiB(m.EstimateBytes))
		}
		add("memory per rank", v)
	}
	if m := t.Memory; m != nil && m.PeakBytes > 0 {
		v := fmt.Sprintf("peak %s (rank %d), reserved %s", rhGiB(m.PeakBytes), m.PeakRank, rhGiB(m.ReservedBytes))
		if m.EstimateBytes > 0 {
			v += fmt.Sprintf("; plan-time estimate %s", rhGiB(m.EstimateBytes))
		}
		if m.CapacityBytes > 0 {
			v += fmt.Sprintf("; against one GPU's %s", rhGiB(m.CapacityBytes))
			if m.Fits != nil && !*m.Fits {
				v += fmt.Sprintf(": DOES NOT FIT (the peak and the process above %.0f%% of it, the plan's rule)", 100*store.RehearsalFitHeadroom)
			}
		}
		add("memory per rank", v)
		if m.LargestMicroBatch > 0 {
			who := "per rank"
			if t.TensorPar > 1 { // every tensor rank of a data-parallel rank runs its micro-batch
				who = "per data-parallel rank (each of its tensor ranks)"
			}
			add("largest micro-batch", fmt.Sprintf("%d %s fits (estimate: %s)", m.LargestMicroBatch, who, m.Method))
		} else if m.Method != "" {
			add("largest micro-batch", m.Method)
		}
	}
	if b := t.Buckets; b != nil {
		sizes := make([]string, len(b.Bytes))
		for i, x := range b.Bytes {
			sizes[i] = rhMiB(x)
		}
		add("buckets", fmt.Sprintf("%d (%s), first %s: %s", b.Count, b.Ops, rhMiB(b.FirstBytes), strings.Join(sizes, " ")))
	}
	if p := t.Pipeline; p != nil {
		add("pipeline", fmt.Sprintf("%s, %d micro-batches, balance %v by %s: %s", p.Schedule, p.Microbatches, p.Balance, p.BalanceBy,
			strings.Join(p.Stages, "; ")))
	}
	if c := t.Checksums; c != nil {
		add("checksums", rhVerdict(c.DataParallelEqual, c.ReplicasEqual)+c.Detail)
	}
	if l := t.Losses; l != nil {
		v := rhLossVerdict(l) + l.Detail
		if len(l.Trial) > 0 {
			v += fmt.Sprintf("; losses %s", rhFloats(l.Trial))
		}
		if len(l.Reference) > 0 {
			v += fmt.Sprintf(", one rank %s", rhFloats(l.Reference))
		}
		add("losses", v)
	}
	if len(t.Paths) > 0 {
		add("paths exercised", strings.Join(t.Paths, "; "))
	}
	for _, f := range t.Faults {
		v := fmt.Sprintf("%s in rank %d at step %d: recorded %s", f.Kind, f.Rank, f.AtStep, f.Outcome)
		if f.FailedRank >= 0 {
			v += fmt.Sprintf(" naming rank %d", f.FailedRank)
		}
		if f.Classified {
			v = "ok: " + v + " as a cluster run would"
		} else {
			v = fmt.Sprintf("WRONG: %s; a cluster run records %s naming rank %d", v, f.Expected, f.Rank)
		}
		add("fault", v)
	}
	for _, n := range t.NotApplied {
		add("not applicable", n)
	}
	if t.StepMS > 0 {
		add("step time", fmt.Sprintf("%.1f ms (%s)", t.StepMS, store.RehearsalNote))
	}
	return out
}

// rehearsalSkipLines are the trials not rehearsed, a line per group of one
// outcome and reason: "12 skipped": "2575ec65, d7adfae6, ...: covered by ...".
func rehearsalSkipLines(r *RehearsalSection) [][2]string {
	var out [][2]string
	for _, g := range r.NotRehearsed {
		ids := make([]string, len(g.Trials))
		for i, id := range g.Trials {
			ids[i] = id
			if id == g.Baseline {
				ids[i] += " (baseline)"
			}
		}
		out = append(out, [2]string{fmt.Sprintf("%d %s", len(g.Trials), strings.ReplaceAll(string(g.Outcome), "_", " ")),
			strings.Join(ids, ", ") + ": " + g.Reason})
	}
	return out
}

// rehearsalSkipCount is how many trials were not rehearsed.
func rehearsalSkipCount(r *RehearsalSection) int {
	n := 0
	for _, g := range r.NotRehearsed {
		n += len(g.Trials)
	}
	return n
}

// rhLossVerdict is rhVerdict for the losses, "NOT CHECKED: " where the check
// could not run (it fails closed all the same).
func rhLossVerdict(l *RehearsalLosses) string {
	if l.NotChecked {
		return "NOT CHECKED: "
	}
	return rhVerdict(l.Agree)
}

func rhVerdict(bs ...*bool) string {
	for _, b := range bs {
		if b != nil && !*b {
			return "DISAGREE: "
		}
	}
	for _, b := range bs {
		if b != nil {
			return "ok: "
		}
	}
	return ""
}

func rhGiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
func rhMiB(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

func rhFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.6g", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// rehearsalCounts is the headline without its label ("3 of 3 trials ran").
func rehearsalCounts(s *Summary) string {
	c := strings.TrimPrefix(s.Headline.Text, store.RehearsalNote+": ")
	if c == "" {
		return "No trial"
	}
	return strings.ToUpper(c[:1]) + c[1:]
}

func rehearsalTitle(t *RehearsalTrial) string {
	if t.Label != "" && t.Label != t.ID {
		return t.ID + " (" + t.Label + ")"
	}
	return t.ID
}

// WriteRehearsalMarkdown writes report.md of a rehearsal.
func WriteRehearsalMarkdown(w io.Writer, s *Summary) error {
	r := s.Rehearsal
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: rehearsal\n\n", s.Study)
	fmt.Fprintf(&b, "**%s.** %s: %s.\n\n", strings.ToUpper(r.Note[:1])+r.Note[1:], rehearsalCounts(s), r.Why)
	dev := r.Device
	if len(r.GPUs) > 0 {
		dev = fmt.Sprintf("%s: GPUs %s (%s, %s each)", r.Device, strings.Join(r.GPUs, ","), r.GPU, rhGiB(r.GPUMem))
	}
	fmt.Fprintf(&b, "Backend %s on %s. Run %s.\n\n## Rehearsal\n", r.Backend, dev, s.RunID)
	if skips := rehearsalSkipLines(r); len(skips) > 0 {
		fmt.Fprintf(&b, "\n### Not rehearsed: %d of %d trials\n\n", rehearsalSkipCount(r), len(s.Trials))
		for _, kv := range skips {
			fmt.Fprintf(&b, "- **%s**: %s\n", kv[0], kv[1])
		}
	}
	for i := range r.Trials {
		t := &r.Trials[i]
		fmt.Fprintf(&b, "\n### %s\n\n", rehearsalTitle(t))
		for _, kv := range rehearsalLines(t) {
			fmt.Fprintf(&b, "- **%s**: %s\n", kv[0], kv[1])
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

var rehearsalHTML = template.Must(template.New("rehearsal").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.S.Study}}: rehearsal</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
.label{background:#fff3cd;border:1px solid #e0c36c;padding:.6rem 1rem;border-radius:4px}
table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}td{border-top:1px solid #ddd;padding:.3rem .5rem;vertical-align:top}
td:first-child{white-space:nowrap;font-weight:600;width:11rem}</style></head><body>
<h1>{{.S.Study}}: rehearsal</h1>
<p class="label"><strong>{{.S.Rehearsal.Note}}.</strong> {{.Counts}}: {{.S.Rehearsal.Why}}.</p>
<p>Backend {{.S.Rehearsal.Backend}} on {{.S.Rehearsal.Device}}{{if .S.Rehearsal.GPUs}} ({{.S.Rehearsal.GPU}}){{end}}. Run {{.S.RunID}}.</p>
<h2 id="rehearsal">Rehearsal</h2>
{{if .Skips}}<h3>Not rehearsed: {{.SkipCount}} of {{len .S.Trials}} trials</h3><table>{{range .Skips}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}</table>
{{end}}{{range .Trials}}<h3>{{.Title}}</h3><table>{{range .Lines}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}</table>
{{end}}</body></html>
`))

// WriteRehearsalHTML writes report.html of a rehearsal.
func WriteRehearsalHTML(w io.Writer, s *Summary) error {
	type row struct {
		Title string
		Lines [][2]string
	}
	var rows []row
	for i := range s.Rehearsal.Trials {
		t := &s.Rehearsal.Trials[i]
		rows = append(rows, row{rehearsalTitle(t), rehearsalLines(t)})
	}
	return rehearsalHTML.Execute(w, struct {
		S         *Summary
		Counts    string
		Trials    []row
		Skips     [][2]string
		SkipCount int
	}{s, rehearsalCounts(s), rows, rehearsalSkipLines(s.Rehearsal), rehearsalSkipCount(s.Rehearsal)})
}

// WriteRehearsalLines prints a rehearsal's trials at the end of `casestudy
// run`: whether each ran and agreed, under the label.
func WriteRehearsalLines(w io.Writer, s *Summary) error {
	fmt.Fprintf(w, "%s\n", s.Headline.Text)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "trial\tlayout\tran\tchecksums\tlosses\tfaults\n")
	for i := range s.Rehearsal.Trials {
		t := &s.Rehearsal.Trials[i]
		ran := string(t.Outcome)
		sums, losses, faults := "-", "-", "-"
		if c := t.Checksums; c != nil {
			sums = strings.TrimSuffix(rhVerdict(c.DataParallelEqual, c.ReplicasEqual), ": ")
		}
		if l := t.Losses; l != nil && l.Agree != nil {
			losses = strings.TrimSuffix(rhLossVerdict(l), ": ")
		}
		if len(t.Faults) > 0 {
			n := 0
			for _, f := range t.Faults {
				if f.Classified {
					n++
				}
			}
			faults = fmt.Sprintf("%d/%d classified", n, len(t.Faults))
		}
		grid := fmt.Sprintf("%dx%d", t.DataPar, t.Stages)
		if t.TensorPar > 1 {
			grid = fmt.Sprintf("tp%dx%dx%d", t.TensorPar, t.DataPar, t.Stages)
		}
		fmt.Fprintf(tw, "%s\t%s mb %d\t%s\t%s\t%s\t%s\n", rehearsalTitle(t), grid, t.MicroBatch, ran, rhOrDash(sums), rhOrDash(losses), faults)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, kv := range rehearsalSkipLines(s.Rehearsal) {
		fmt.Fprintf(w, "not rehearsed, %s: %s\n", kv[0], kv[1])
	}
	return nil
}

func renderRehearsal(w io.Writer, s *Summary, format string) error {
	switch format {
	case "html":
		return WriteRehearsalHTML(w, s)
	case "md":
		return WriteRehearsalMarkdown(w, s)
	}
	return fmt.Errorf("unknown report format %q", format)
}

func rhOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
