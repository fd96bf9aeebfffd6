package predict

import (
	"bytes"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The files a prediction writes into a run directory (predict/runs.Write):
// the report reads JSONFile for its Predicted section.
const (
	JSONFile     = "predicted.json"
	MarkdownFile = "predicted.md"
	ChartFile    = "predicted.svg"
)

// File is predicted.json: the predicted trials of a one-rank run on Ranks,
// and, when they were checked against a measured run, the check.
type File struct {
	Note        string       `json:"note"`
	Ranks       int          `json:"ranks"`
	Model       string       `json:"model"`
	Predictions []Prediction `json:"predictions"`
	Validation  *Validation  `json:"validation,omitempty"`
}

// Note is what predicted.json says it is.
const Note = "predictions, not measurements (docs/predict.md)"

type band struct {
	xys    plotter.XYs
	lo, hi []float64
}

func (b band) Len() int                        { return len(b.xys) }
func (b band) XY(i int) (float64, float64)     { return b.xys[i].X, b.xys[i].Y }
func (b band) YError(i int) (float64, float64) { return b.xys[i].Y - b.lo[i], b.hi[i] - b.xys[i].Y }

// Chart draws each predicted trial's step time with its band (and, with a
// validation, the measured step time beside it) as SVG.
func Chart(preds []Prediction, changed func(Prediction) string, v *Validation) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Predicted step time on %d ranks (not measured)", preds[0].Ranks)
	p.Y.Label.Text = "step (ms)"
	p.Y.Min = 0
	b := band{}
	names := make([]string, len(preds))
	for i, pr := range preds {
		b.xys = append(b.xys, plotter.XY{X: float64(i), Y: pr.StepMS})
		b.lo, b.hi = append(b.lo, pr.LowMS), append(b.hi, pr.HighMS)
		names[i] = changed(pr)
	}
	pts, err := plotter.NewScatter(b)
	if err != nil {
		return nil, err
	}
	pts.GlyphStyle.Shape = draw.CircleGlyph{}
	pts.GlyphStyle.Radius = vg.Points(3)
	bars, err := plotter.NewYErrorBars(b)
	if err != nil {
		return nil, err
	}
	p.Add(bars, pts)
	p.Legend.Add("predicted (band)", pts)
	if v != nil {
		meas := plotter.XYs{}
		byID := map[string]float64{}
		for _, c := range v.Checks {
			byID[c.ID] = c.Measured
		}
		for i, pr := range preds {
			if m, ok := byID[pr.ID]; ok {
				meas = append(meas, plotter.XY{X: float64(i) + 0.15, Y: m})
			}
		}
		if len(meas) > 0 {
			ms, err := plotter.NewScatter(meas)
			if err != nil {
				return nil, err
			}
			ms.GlyphStyle.Shape = draw.BoxGlyph{}
			ms.GlyphStyle.Radius = vg.Points(3)
			p.Add(ms)
			p.Legend.Add("measured", ms)
		}
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = -0.5
	p.X.Tick.Label.XAlign = draw.XLeft
	p.Legend.Top = true
	w := vg.Length(max(4, len(preds))) * vg.Inch * 1.2
	c, err := p.WriterTo(w, 4*vg.Inch, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
