package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// The Predicted section: trials predicted on N ranks from a one-rank run
// (predicted.json beside the run, written by `casestudy run --predict N` or
// `casestudy predict`; docs/predict.md), in a section and chart of their own
// in report.html and report.md. Summary.Predicted is not part of
// summary.json, so no verdict, baseline, compare or history ever sees a
// prediction; the section says so.

// predictedLimit caps predicted.json (a few hundred trials' predictions are
// well under a MiB).
const predictedLimit = 64 << 20

// LoadPredicted reads the predicted.json in run's directory: nil without
// one. It reads only a regular file (a FIFO there would hang the report),
// and only run's own predictions: predicted.json records the run ID it was
// predicted from (run_id), which must be the one run's manifest records. A file written before run_id was recorded is taken when it can
// only be this run's: the run ran one rank (predictions start from a
// one-rank run) and every predicted trial is a trial of its plan, by ID and
// knob values. Any file it cannot take is an input error (exit status 2)
// that names the file and says what to do.
func LoadPredicted(run *store.Run) (*predict.File, error) {
	if run == nil || run.Dir == "" {
		return nil, nil
	}
	dir := run.Dir
	p := filepath.Join(dir, predict.JSONFile)
	b, err := store.ReadRegular(p, predictedLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	again := fmt.Sprintf("predict again (casestudy predict %s --gpus N --topology T|--fit F) or remove it", dir)
	if err != nil {
		return nil, exitcode.Usage(fmt.Errorf("%w: %s", err, again))
	}
	var f struct {
		RunID string `json:"run_id"`
		predict.File
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, exitcode.Usage(fmt.Errorf("%s: not a prediction file (%v; cut short by a crash?): %s", p, err, again))
	}
	if len(f.Predictions) == 0 {
		return nil, exitcode.Usage(fmt.Errorf("%s: no predictions: %s", p, again))
	}
	if err := predictedBelongs(&run.Manifest, f.RunID, f.Predictions); err != nil {
		return nil, exitcode.Usage(fmt.Errorf("%s: %w; a report shows only the predictions of its own run: "+
			"move the file to the run it was predicted from, or remove it (casestudy predict RUN_DIR writes a run's own)", p, err))
	}
	return &f.File, nil
}

// predictedBelongs checks that predictions recorded as predicted from run
// ID id ("" in files written before it was recorded) are those of the run
// whose manifest is m.
func predictedBelongs(m *store.Manifest, id string, preds []predict.Prediction) error {
	if id != "" {
		if id != m.RunID {
			return fmt.Errorf("it was predicted from the run %s, not from this run (%s)", id, m.RunID)
		}
		return nil
	}
	// An older file without run_id: only a one-rank run whose plan holds
	// every predicted trial.
	for _, k := range []string{"ranks", "gpus"} {
		if w, ok := m.Workload[k]; ok && w != nil {
			if v := stats.Number(w); v != 1 {
				return fmt.Errorf("it records no run ID, and this run ran %g %s: predictions come from a one-rank run", v, k)
			}
			break
		}
	}
	plan := map[string]map[string]string{}
	for _, t := range m.Plan {
		plan[t.ID] = t.Knobs
	}
	for _, pr := range preds {
		if k, ok := plan[pr.ID]; !ok || !sameKnobs(k, pr.Knobs) {
			return fmt.Errorf("it records no run ID, and its trial %s is not a trial of this run", pr.ID)
		}
	}
	return nil
}

// predictedLabel names a prediction the way the report names the trial with
// the same knob values (its ID when the run has no such trial).
func predictedLabel(s *Summary) func(predict.Prediction) string {
	return func(p predict.Prediction) string {
		for i := range s.Trials {
			if sameKnobs(s.Trials[i].Knobs, p.Knobs) {
				return labelOf(&s.Trials[i])
			}
		}
		return p.ID
	}
}

func sameKnobs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// predictedIntro is the section's first paragraph: what it is and is not.
func predictedIntro(f *predict.File) string {
	return fmt.Sprintf("Predictions, not measurements: each trial's step time on %d ranks, simulated from one-rank "+
		"measurements (the inputs below) with the collective cost model %s (docs/predict.md). They are in no verdict, "+
		"baseline, compare or history. The band spans the one-rank launches' spread and the cost model's own error.",
		f.Ranks, f.Model)
}

// predictedInputs describes the inputs one prediction used.
func predictedInputs(p predict.Prediction) string {
	in := p.Inputs
	s := fmt.Sprintf("forward %.2f ms, backward %.2f ms, tail %.2f ms, optimizer %.2f ms, %d buckets (medians over %s); κ %.3g, compute scale %.3g, cost model error ±%.1f%%",
		in.ForwardMS, in.BackwardMS, in.TailMS, in.OptimizerMS, len(in.Buckets), nLaunches(p.Launches), p.Kappa, p.ComputeScale, 100*p.CostError)
	if c := p.Calibration; c != nil && c.ShadowRanks > 0 {
		s += fmt.Sprintf(" (the trial's stretch calibration: each loaded step's backward over the clean steps beside it, median ratio %.3f over %d steps; backward %.2f ms clean, %.2f ms beside its own collectives on a Gloo group of %d)",
			c.Ratio, c.Steps, c.BackwardMS, c.LoadedBackwardMS, c.ShadowRanks)
	} else if c != nil {
		s += fmt.Sprintf(" (measured: backward %.2f ms alone, %.2f ms beside a %.1f GB/s load)", c.BackwardMS, c.LoadedBackwardMS, c.LoadGBps)
	}
	if p.Threads > 0 {
		s += fmt.Sprintf("; %d thread(s) per rank on %d cores", p.Threads, p.Cores)
	}
	if p.Concurrent {
		s += fmt.Sprintf("; inputs measured as %d copies at once, sharing the host as the ranks do", p.Ranks)
	}
	if p.RankDraws > 0 {
		s += fmt.Sprintf("; %d ranks drawn from the measured steps (%d draws; every rank at the median: %.2f ms)", p.Ranks, p.RankDraws, p.MedianProfileStepMS)
	}
	if p.CollectiveDraws {
		s += "; each collective's time drawn from its calibration's times"
	}
	if p.ModelBeside != "" {
		s += "; collectives beside compute: " + p.ModelBeside
	}
	if p.Stretch != nil {
		s += fmt.Sprintf("; %s (backward +%.2f ms at the median)", p.Stretch.Name(), p.StretchMS)
	} else if p.StretchMS > 0 {
		s += fmt.Sprintf("; the backward at 1/κ of its pace while a collective runs (+%.2f ms at the median)", p.StretchMS)
	}
	return s
}

func writePredictedMD(b *strings.Builder, s *Summary) {
	f := s.Predicted
	if f == nil {
		return
	}
	label := predictedLabel(s)
	fmt.Fprintf(b, "## Predicted trials on %d ranks (not measured)\n\n%s\n\n", f.Ranks, mdEscape(predictedIntro(f)))
	mdRow(b, []string{"trial", "overlap", "predicted step", "band", "exposed comm", "inputs used"})
	mdRow(b, []string{"---", "---", "---:", "---:", "---:", "---"})
	for _, p := range f.Predictions {
		mdRow(b, []string{label(p), fmt.Sprint(p.Overlap), fmt.Sprintf("%.2f ms", p.StepMS),
			fmt.Sprintf("%.2f–%.2f ms", p.LowMS, p.HighMS), fmt.Sprintf("%.2f ms", p.ExposedCommMS), predictedInputs(p)})
	}
	b.WriteString("\n")
	if v := f.Validation; v != nil && len(v.Checks) > 0 {
		writeValidationMD(b, v)
	}
	fmt.Fprintf(b, "Chart: `%s` beside the run.\n\n", predict.ChartFile)
}

func writeValidationMD(b *strings.Builder, v *predict.Validation) {
	b.WriteString("### Predicted against measured\n\n")
	mdRow(b, []string{"trial", "predicted", "measured", "error", "in band"})
	mdRow(b, []string{"---", "---:", "---:", "---:", "---"})
	for _, c := range v.Checks {
		mdRow(b, []string{c.Changed, fmt.Sprintf("%.2f ms", c.Predicted), fmt.Sprintf("%.2f ms", c.Measured),
			fmt.Sprintf("%+.1f%%", 100*c.Error), fmt.Sprint(c.InBand)})
	}
	fmt.Fprintf(b, "\n%s\n\n", mdEscape(validationText(v)))
}

func validationText(v *predict.Validation) string {
	if v.Incomplete() != "" { // no error and no winner stated: only why not
		return v.WinnerLine()
	}
	same := "a different winner"
	if v.SameBest {
		same = "the same winner"
	}
	t := fmt.Sprintf("Median absolute error %.1f%% over %d trials; the model picked %s (predicted best %s, measured best %s).",
		100*v.MedianAbsError, len(v.Checks), same, v.PredictedBest, v.MeasuredBest)
	return t + " " + v.WinnerLine()
}

type predictedRow struct {
	Label, Overlap, Step, Band, Exposed, Inputs string
}

type predictedView struct {
	Ranks   int
	Intro   string
	Rows    []predictedRow
	Chart   template.HTML
	Checks  []predict.Check
	Errors  []string // per check, formatted
	Verdict string
}

var predictedTemplate = template.Must(template.New("predicted").Parse(`<h2 id="predicted">Predicted trials on {{.Ranks}} ranks (not measured)</h2>
<p class="muted">{{.Intro}}</p>
<div class="chart predicted">{{.Chart}}</div>
<div class="tablewrap"><table>
<thead><tr><th>trial</th><th>overlap</th><th class="num">predicted step</th><th class="num">band</th><th class="num">exposed comm</th><th>inputs used</th></tr></thead>
<tbody>{{range .Rows}}<tr><td class="config">{{.Label}}</td><td>{{.Overlap}}</td><td class="num">{{.Step}}</td><td class="num">{{.Band}}</td><td class="num">{{.Exposed}}</td><td class="wrap">{{.Inputs}}</td></tr>
{{end}}</tbody></table></div>
{{if .Checks}}<h3>Predicted against measured</h3>
<div class="tablewrap"><table>
<thead><tr><th>trial</th><th class="num">predicted</th><th class="num">measured</th><th class="num">error</th><th>in band</th></tr></thead>
<tbody>{{range $i, $c := .Checks}}<tr><td class="config">{{$c.Changed}}</td><td class="num">{{printf "%.2f ms" $c.Predicted}}</td><td class="num">{{printf "%.2f ms" $c.Measured}}</td><td class="num">{{index $.Errors $i}}</td><td>{{$c.InBand}}</td></tr>
{{end}}</tbody></table></div>
<p>{{.Verdict}}</p>{{end}}
`))

// predictedHTML is the section of report.html ("" without predictions).
func predictedHTML(s *Summary) (template.HTML, error) {
	f := s.Predicted
	if f == nil {
		return "", nil
	}
	label := predictedLabel(s)
	svg, err := predict.Chart(f.Predictions, label, f.Validation)
	if err != nil {
		return "", fmt.Errorf("the predicted trials' chart: %w", err)
	}
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:] // no XML declaration inside HTML
	}
	v := predictedView{Ranks: f.Ranks, Intro: predictedIntro(f),
		Chart: template.HTML(svg)} // #nosec: gonum's SVG writer escapes every text (html.EscapeString)
	for _, p := range f.Predictions {
		v.Rows = append(v.Rows, predictedRow{Label: label(p), Overlap: fmt.Sprint(p.Overlap),
			Step: fmt.Sprintf("%.2f ms", p.StepMS), Band: fmt.Sprintf("%.2f–%.2f ms", p.LowMS, p.HighMS),
			Exposed: fmt.Sprintf("%.2f ms", p.ExposedCommMS), Inputs: predictedInputs(p)})
	}
	if val := f.Validation; val != nil && len(val.Checks) > 0 {
		v.Checks = slices.Clone(val.Checks)
		for _, c := range v.Checks {
			v.Errors = append(v.Errors, fmt.Sprintf("%+.1f%%", 100*c.Error))
		}
		v.Verdict = validationText(val)
	}
	var b strings.Builder
	if err := predictedTemplate.Execute(&b, v); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil // #nosec: html/template escaped every value
}
