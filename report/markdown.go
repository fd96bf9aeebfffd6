package report

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/units"
)

// WriteMarkdown writes report.md: the headline, the trials table, what did
// not finish, the checklist findings, re-run commands and provenance. It is
// meant for pull requests and wikis (GitHub-flavoured Markdown).
func WriteMarkdown(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: casestudy report\n\n", mdEscape(s.Study))
	fmt.Fprintf(&b, "Run `%s` · %s · %s\n\n", s.RunID, s.Created.Format("2006-01-02 15:04 UTC"), mdEscape(SetupLine(&s.Provenance)))
	writeMeasuredMD(&b, s.Measured)
	fmt.Fprintf(&b, "**Headline.** %s\n\n", mdEscape(s.Headline.Text))
	if n := intervalNote(s); n != "" {
		fmt.Fprintf(&b, "%s\n\n", mdEscape(n))
	}
	fmt.Fprintf(&b, "Trials: %s", CountsText(s.Counts))
	if len(s.Dropped) > 0 {
		fmt.Fprintf(&b, " · %d combination(s) dropped before running (not trials, listed below)", len(s.Dropped))
	}
	b.WriteString("\n\n")

	if ok := okTrials(s); len(ok) > 0 {
		writeTrialsMD(&b, s, ok)
		writeRankMemoryMD(&b, ok)
	}
	writeLaunchNotesMD(&b, s)
	writeLaunchesMD(&b, s)

	if notOK := notOKTrials(s); len(notOK) > 0 {
		b.WriteString("## Did not run to the end\n\n")
		mdRow(&b, []string{"configuration", "trial", "outcome", "reason"})
		mdRow(&b, []string{"---", "---", "---", "---"})
		for _, t := range notOK {
			mdRow(&b, []string{labelOf(t), t.ID, string(t.Outcome), t.Error})
		}
		b.WriteString("\n")
	}
	if len(s.Dropped) > 0 {
		b.WriteString("## Dropped before running\n\nCombinations of the sweep the planner dropped: nothing ran, and they are counted nowhere else.\n\n")
		mdRow(&b, []string{"combination", "reason"})
		mdRow(&b, []string{"---", "---"})
		for _, d := range s.Dropped {
			mdRow(&b, []string{droppedLabel(s, d.Knobs), d.Reason})
		}
		b.WriteString("\n")
	}

	writePredictedMD(&b, s)
	writeProfilesMD(&b, s.Profiles)

	writeNCCLMD(&b, s.NCCL)
	writeTimelineMD(&b, s.Timeline)

	b.WriteString("## Checklist findings\n\n")
	writeFindingsMD(&b, s.Findings)

	if warns := allWarnings(s); len(warns) > 0 {
		b.WriteString("## Statistical warnings\n\n")
		for _, w := range warns {
			fmt.Fprintf(&b, "- %s\n", mdEscape(w))
		}
		b.WriteString("\n")
	}

	b.WriteString("## Re-run a single trial\n\n<details><summary>commands</summary>\n\n```sh\n")
	for _, t := range s.Trials {
		if t.Command != "" {
			fmt.Fprintf(&b, "%s\n", t.Command)
		}
	}
	b.WriteString("```\n\n</details>\n\n")

	b.WriteString("## Provenance\n\n")
	mdRow(&b, []string{"", ""})
	mdRow(&b, []string{"---", "---"})
	for _, kv := range provenanceRows(s) {
		mdRow(&b, []string{kv[0], kv[1]})
	}
	if fixed := fixedKnobs(s); len(fixed) > 0 {
		mdRow(&b, []string{"fixed knobs", knobList(fixed)})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLaunchNotesMD lists the launches left out of the statistics and the
// unsteady ones.
func writeLaunchNotesMD(b *strings.Builder, s *Summary) {
	for _, sec := range []struct {
		title string
		notes []LaunchNote
	}{{"Launches left out of the statistics", s.Excluded}, {"Launches that were not steady (kept)", s.Unsteady}} {
		if len(sec.notes) == 0 {
			continue
		}
		fmt.Fprintf(b, "## %s\n\n", sec.title)
		mdRow(b, []string{"trial", "launch", "why"})
		mdRow(b, []string{"---", "---", "---"})
		for _, n := range sec.notes {
			mdRow(b, []string{n.Trial, fmt.Sprint(n.Repeat), n.Reason})
		}
		b.WriteString("\n")
	}
}

func writeFindingsMD(b *strings.Builder, findings []checklist.Result) {
	n := 0
	for _, f := range findings {
		if f.Status != checklist.Finding {
			continue
		}
		n++
		fmt.Fprintf(b, "- **%s** `%s` %s: %s", f.Severity, f.RuleID, mdEscape(f.Title), mdEscape(f.Message))
		if f.Recommendation != "" {
			fmt.Fprintf(b, " *Do:* %s", mdEscape(f.Recommendation))
		}
		if len(f.Trials) > 0 {
			fmt.Fprintf(b, " (trials: %s)", strings.Join(f.Trials, ", "))
		}
		b.WriteString("\n")
	}
	if n == 0 {
		if len(findings) == 0 {
			b.WriteString("The checklist was not evaluated for this report.\n")
		} else {
			fmt.Fprintf(b, "No findings: %d rule(s) passed or did not apply.\n", len(findings))
		}
	}
	b.WriteString("\n")
}

// SetupLine is "2× NVIDIA H200 · driver 550.54 · CUDA 12.4 · NCCL 2.21.5 · torch 2.4.0".
func SetupLine(p *Provenance) string {
	var parts []string
	if len(p.GPUs) > 0 {
		names := map[string]int{}
		for _, g := range p.GPUs {
			name := g
			if i := strings.Index(g, ": "); i >= 0 {
				name = g[i+2:]
			}
			if i := strings.Index(name, " ("); i >= 0 {
				name = name[:i]
			}
			names[name]++
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			parts = append(parts, fmt.Sprintf("%d× %s", names[n], n))
		}
	} else if p.CPU != "" {
		parts = append(parts, "CPU "+p.CPU)
	}
	if p.Nodes > 1 {
		parts = append(parts, fmt.Sprintf("%d nodes", p.Nodes))
	}
	for _, kv := range [][2]string{{"driver", p.Driver}, {"CUDA", p.CUDA}, {"NCCL", p.NCCL}, {"torch", p.Torch}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(parts, " · ")
}

func provenanceRows(s *Summary) [][2]string {
	p := &s.Provenance
	driver := p.Driver
	if p.CUDADriver != "" {
		driver = strings.TrimSpace(driver + " (CUDA driver " + p.CUDADriver + ")")
	}
	var libs []string
	for _, kv := range [][2]string{{"torch", p.Torch}, {"CUDA", p.CUDA}, {"cuDNN", p.CuDNN}, {"NCCL", p.NCCL}} {
		if kv[1] != "" {
			libs = append(libs, kv[0]+" "+kv[1])
		}
	}
	all := [][2]string{
		{"casestudy", p.Casestudy},
		{"command", p.Command},
		{"study", p.StudyPath},
		{"study sha256", p.StudySHA256},
		{"host", p.Host},
		{"CPU", p.CPU},
		{"GPUs", strings.Join(p.GPUs, "; ")},
		{"ranks' GPUs", strings.Join(p.RankGPUs, "; ")},
		{"driver", driver},
		{"libraries", strings.Join(libs, ", ")},
		{"cuDNN the ranks loaded", strings.Join(p.CuDNNLoaded, ", ")},
		{"library files the ranks loaded", strings.Join(p.Libraries, "; ")},
		{"nodes", fmt.Sprint(p.Nodes)},
		{"NVLink multicast", nvlsFact(s)},
		{"BatchNorm buffers", p.BNBuffers},
	}
	var rows [][2]string
	for _, kv := range all {
		if kv[1] != "" {
			rows = append(rows, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		rows = append(rows, [2]string{"env " + k, p.Env[k]})
	}
	return rows
}

// fixedKnobs are the knobs every trial shares.
func fixedKnobs(s *Summary) map[string]string {
	out := map[string]string{}
	if len(s.Trials) == 0 {
		return out
	}
	swept := map[string]bool{}
	for _, k := range s.SweptKnobs {
		swept[k] = true
	}
	for k, v := range s.Trials[0].Knobs {
		if !swept[k] {
			out[k] = v
		}
	}
	return out
}

func okTrials(s *Summary) []*Trial {
	var out []*Trial
	for i := range s.Trials {
		if s.Trials[i].OK() {
			out = append(out, &s.Trials[i])
		}
	}
	return out
}

func notOKTrials(s *Summary) []*Trial {
	var out []*Trial
	for i := range s.Trials {
		if !s.Trials[i].OK() {
			out = append(out, &s.Trials[i])
		}
	}
	return out
}

func changedKnobs(t *Trial) map[string]string {
	out := map[string]string{}
	for _, k := range t.Changed {
		out[k] = t.Knobs[k]
	}
	return out
}

// memText is the peak memory, "n/a" when not measured (CPU runs).
func memText(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return units.Bytes(b)
}

func mfuText(mfu float64) string {
	if mfu == 0 {
		return "n/a"
	}
	return Percent(mfu)
}

// allWarnings are the summary's warnings, then the headline's, then the
// trials' grouped by text: "need >= 6 samples ... (trials a, b)".
func allWarnings(s *Summary) []string {
	out := append([]string(nil), s.Warnings...)
	var order []string
	trials := map[string][]string{}
	for _, t := range s.Trials {
		for _, w := range t.Warnings {
			if trials[w] == nil {
				order = append(order, w)
			}
			trials[w] = append(trials[w], t.ID)
		}
	}
	for _, w := range order {
		ids := trials[w]
		if len(ids) == 1 {
			out = append(out, ids[0]+": "+w)
			continue
		}
		out = append(out, fmt.Sprintf("%s (%d trials: %s)", w, len(ids), strings.Join(ids, ", ")))
	}
	return out
}

// mdReplacer escapes what GitHub-flavoured Markdown would read as markup,
// with backslashes (CommonMark escapes any ASCII punctuation): "|" ends a
// table cell, "*", "`", "[" and "]" format. "<" opens HTML only before a
// letter, "/", "!" or "?" (htmlStart); ">" is markup only at the start of a
// line, where no escaped text begins. So "need >= 6 samples" and "a <= 32"
// stay as written in the raw file.
var mdReplacer = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "*", `\*`, "`", "\\`", "[", `\[`, "]", `\]`)

var htmlStart = regexp.MustCompile(`<([A-Za-z/!?])`)

// mdEscape escapes s for a Markdown line or table cell; tildes only when
// two of them could strike through the text between.
func mdEscape(s string) string {
	s = htmlStart.ReplaceAllString(mdReplacer.Replace(s), `\<$1`)
	if strings.Count(s, "~") >= 2 {
		s = strings.ReplaceAll(s, "~", `\~`)
	}
	return s
}

func mdRow(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		if c != "---" {
			c = mdEscape(c)
		}
		fmt.Fprintf(b, " %s |", c)
	}
	b.WriteString("\n")
}
