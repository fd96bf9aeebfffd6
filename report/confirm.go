package report

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/stats"
)

type engineInfo = engine.Info

// ConfirmFile is the suggested confirmation study written next to the report.
const ConfirmFile = "confirm.yaml"

// Confirm is a suggested confirmation study: the decided winners combined,
// each winner alone, and, where a winner changes the global batch, the
// baseline at that global batch, as a `strategy: list` study on top of the
// run's own study (same model, workload and baseline).
type Confirm struct {
	File    string              `json:"file"`    // ConfirmFile
	Winners map[string]string   `json:"winners"` // knob -> value decided better than the baseline
	Trials  []map[string]string `json:"trials"`  // the list's entries
	YAML    string              `json:"yaml"`
}

// paramsText is 336226108 as "336.2M".
func paramsText(n int64) string {
	v := float64(n)
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + "B"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// winners are the trials decided better than the baseline by more than the
// study's threshold (stats.Comparison.Winner: only those are called a win),
// best first.
func winners(s *Summary) []*Trial {
	var out []*Trial
	for i := range s.Trials {
		t := &s.Trials[i]
		if c := t.VsBaseline; c != nil && c.Winner() {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b *Trial) int {
		switch {
		case a.VsBaseline.Ratio > b.VsBaseline.Ratio:
			return -1
		case a.VsBaseline.Ratio < b.VsBaseline.Ratio:
			return 1
		}
		return 0
	})
	return out
}

// globalBatchOf is a trial's samples per optimizer step with the baseline's
// data-parallel ranks, 0 when its micro_batch is unknown.
func globalBatchOf(t *Trial, w *Measured) int {
	mb, err := strconv.Atoi(t.Knobs["micro_batch"])
	if err != nil || mb <= 0 {
		return 0
	}
	return mb * atoiOr(t.Knobs["grad_accum"], 1) * max(1, w.DataRanks)
}

// precisionNote says how a precision changes the numerics of training.
var precisionNote = map[string]string{
	"fp16": "fp16 autocast with dynamic loss scaling: 5-bit exponent, steps with inf/nan gradients are skipped",
	"bf16": "bf16 autocast: 8-bit mantissa in matmuls and activations",
	"fp8":  "fp8: the linear layers' matmuls in float8 (e4m3, 3-bit mantissa; gradients e5m2) with dynamic scaling, the rest bf16 autocast",
	"tf32": "TF32 matmuls: inputs rounded to a 10-bit mantissa",
	"fp32": "full fp32",
}

// recipeCaveats say, for each decided winner (and the headline's best),
// where the setting changes the training recipe rather than only its speed:
// the global batch (micro_batch, grad_accum, ranks) or the numerics
// (precision, gradient compression).
func recipeCaveats(s *Summary, w *Measured) []string {
	cands := winners(s)
	for i := range s.Trials {
		if t := &s.Trials[i]; t.Best && !t.Baseline && !slices.Contains(cands, t) {
			cands = append(cands, t)
		}
	}
	var out []string
	for _, t := range cands {
		status := "decided faster"
		if c := t.VsBaseline; c == nil || c.Verdict != stats.Better {
			status = "the best trial, not decided"
		} else if !c.Winner() {
			status = "the best trial, faster but by more than the threshold not shown"
		}
		if gb := globalBatchOf(t, w); gb > 0 && w.GlobalBatch > 0 && gb != w.GlobalBatch {
			out = append(out, fmt.Sprintf("%s (%s) changes the global batch from %d to %d samples per optimizer step: "+
				"a different training recipe (learning rate, warm-up and convergence per sample change with it), "+
				"not only a faster one; compare at equal global batch before adopting it", labelOf(t), status, w.GlobalBatch, gb))
		}
		if p := t.Knobs["precision"]; p != "" && w.Precision != "" && p != w.Precision {
			out = append(out, fmt.Sprintf("%s (%s) changes the numerics from %s to %s (%s): check the loss curve, not only the speed",
				labelOf(t), status, w.Precision, p, precisionNote[p]))
		}
		if c := t.Knobs["ddp.compression"]; c != "" && c != "none" && slices.Contains(t.Changed, "ddp.compression") {
			out = append(out, fmt.Sprintf("%s (%s) compresses the gradients (%s): the optimizer sees different gradients; check convergence",
				labelOf(t), status, c))
		}
	}
	return out
}

// confirmOf builds the confirmation study from the decided winners that
// change one knob each: the best value per knob, combined; each alone; and,
// where one changes the global batch, the baseline at that global batch
// (grad_accum scaled). outDir is where the YAML goes (for extends paths).
func confirmOf(s *Summary, w *Measured, studyText, studyPath, outDir string) *Confirm {
	win := map[string]string{}
	var order []string
	var alone []*Trial
	for _, t := range winners(s) {
		if len(t.Changed) != 1 {
			continue
		}
		k := t.Changed[0]
		if _, seen := win[k]; !seen {
			win[k] = t.Knobs[k]
			order = append(order, k)
			alone = append(alone, t)
		}
	}
	if len(win) == 0 {
		return nil
	}
	c := &Confirm{File: ConfirmFile, Winners: win}
	add := func(t map[string]string) {
		if !slices.ContainsFunc(c.Trials, func(o map[string]string) bool { return maps.Equal(o, t) }) {
			c.Trials = append(c.Trials, t)
		}
	}
	if len(win) > 1 {
		add(maps.Clone(win))
	}
	for _, t := range alone {
		k := t.Changed[0]
		add(map[string]string{k: t.Knobs[k]})
		gb := globalBatchOf(t, w)
		if gb > 0 && w.GlobalBatch > 0 && gb > w.GlobalBatch && w.MicroBatch > 0 && gb%(w.MicroBatch*max(1, w.DataRanks)) == 0 {
			add(map[string]string{"grad_accum": strconv.Itoa(gb / (w.MicroBatch * max(1, w.DataRanks)))})
		}
	}
	text, err := confirmYAML(c, order, s.Study, s.RunID, studyText, studyPath, outDir)
	if err != nil {
		return nil
	}
	c.YAML = text
	return c
}

// parseYAML is the top mapping of a study text, nil when it does not parse.
func parseYAML(text string) *yaml.Node {
	var doc yaml.Node
	if text == "" || yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	return doc.Content[0]
}

// setKey sets key to value in a mapping node, appending it when absent.
func setKey(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, value)
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// confirmYAML rewrites the run's study: a new name and description, and its
// sweep replaced by the list of confirmation trials. A relative extends is
// made relative to outDir.
func confirmYAML(c *Confirm, order []string, study, runID, studyText, studyPath, outDir string) (string, error) {
	top := parseYAML(studyText)
	if top == nil {
		return "", fmt.Errorf("the study text does not parse")
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, k+"="+c.Winners[k])
	}
	dropComments(top)
	setKey(top, "name", scalar(study+"-confirm"))
	setKey(top, "description", scalar(fmt.Sprintf("Confirmation of %s: do the decided winners (%s) hold, alone and together?",
		study, strings.Join(parts, ", "))))
	if ext := mapValue(top, "extends"); ext != nil && ext.Kind == yaml.ScalarNode && !filepath.IsAbs(ext.Value) && studyPath != "" && outDir != "" {
		if rel, err := filepath.Rel(outDir, filepath.Join(filepath.Dir(studyPath), ext.Value)); err == nil {
			ext.Value = filepath.ToSlash(rel)
		}
	}
	trials := &yaml.Node{Kind: yaml.SequenceNode}
	for _, t := range c.Trials {
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			m.Content = append(m.Content, scalar(k), scalar(t[k]))
		}
		trials.Content = append(trials.Content, m)
	}
	sweep := &yaml.Node{Kind: yaml.MappingNode}
	sweep.Content = append(sweep.Content, scalar("strategy"), scalar("list"), scalar("trials"), trials)
	setKey(top, "sweep", sweep)
	top.HeadComment = fmt.Sprintf("Suggested by casestudy report from run %s of %s: the decided winners\n"+
		"combined, each alone, and the baseline at a winner's global batch where it changes it.\n"+
		"Run it with: casestudy run %s", runID, study, ConfirmFile)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(top); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// dropComments removes the study's comments: they describe the original
// sweep, not the confirmation.
func dropComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		dropComments(c)
	}
}
