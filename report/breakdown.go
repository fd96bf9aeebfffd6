package report

import (
	"image/color"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/casestudy/casestudy/profile"
)

type profileSummary = profile.Summary

// Breakdown splits: how a trial's step is divided.
const (
	SplitPhases  = ""        // forward, backward, optimizer, comm, bubble (the engine's timers)
	SplitProfile = "profile" // a replayed CUDA graph, split by the kernel profile (knob profile)
	SplitNone    = "none"    // a replayed CUDA graph without a profile: one replay, not split
)

// GraphNotSplit is what the breakdown says of a graphed trial without a
// profile.
const GraphNotSplit = "one graph replay: not split; run with --profile 3"

// KernelPart is one share of a profiled step, in ms of the measured step.
type KernelPart struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
}

// profileGroups are the kernel categories the breakdown names; the others
// go to "other kernels".
var profileGroups = []struct {
	name string
	cats []string
	col  color.Color
}{
	{"matmul kernels", []string{profile.GEMM}, color.RGBA{0, 80, 140, 255}},
	{"attention kernels", []string{profile.Attention}, color.RGBA{120, 80, 170, 255}},
	{"optimizer kernels", []string{"optimizer"}, colGreen},
	{"communication kernels", []string{profile.Communication}, colRed},
	{"other kernels", nil, colSky},
}

// splitGraphBreakdowns gives the graphed trials, whose engine timers read 0
// (a replay is one launch), a split: from the kernel profile where the trial
// was profiled (its device-busy time divided by kernel category, and the
// device idle), else none, with GraphNotSplit.
func splitGraphBreakdowns(s *Summary) {
	for i := range s.Trials {
		t := &s.Trials[i]
		b := t.Breakdown
		if b == nil || t.Knobs["graphs"] != "true" || b.ForwardMS+b.BackwardMS+b.OptimizerMS+b.ExposedCommMS+b.BubbleMS > 0 {
			continue
		}
		p := profileOf(s, t.ID)
		if p == nil || p.Device != "cuda" || p.StepMS <= 0 || p.KernelMS <= 0 {
			b.Split, b.Note = SplitNone, GraphNotSplit
			continue
		}
		step := t.StepMS.Median
		busy := min(step, step*p.BusyMS/p.StepMS)
		parts := make([]float64, len(profileGroups))
		for _, c := range p.Categories {
			g := len(profileGroups) - 1
			for j, pg := range profileGroups {
				for _, name := range pg.cats {
					if strings.EqualFold(c.Category, name) {
						g = j
					}
				}
			}
			parts[g] += busy * c.MS / p.KernelMS
		}
		b.Split, b.Kernels = SplitProfile, nil
		for j, pg := range profileGroups {
			if parts[j] > 0 {
				b.Kernels = append(b.Kernels, KernelPart{Name: pg.name, MS: parts[j]})
			}
		}
		b.IdleMS = max(0, step-busy)
		b.OtherMS = 0
		b.Note = "split by the kernel profile: the device-busy share of the step by kernel category, and the device idle"
	}
}

// profileOf is the trial's kernel profile (rank 0, mean over launches).
func profileOf(s *Summary, id string) *profileSummary {
	if s.Profiles == nil {
		return nil
	}
	for _, tp := range s.Profiles.Trials {
		if tp.ID == id {
			return tp.Profile
		}
	}
	return nil
}

// kernelPart is a profiled trial's ms of one named kernel group.
func (b *Breakdown) kernelPart(name string) float64 {
	for _, k := range b.Kernels {
		if k.Name == name {
			return k.MS
		}
	}
	return 0
}

// noteUnsplit labels the bar of every graphed trial without a profile with
// GraphNotSplit (inside the bar, which is then all "other") and returns how
// many there are.
func noteUnsplit(f *figure, trials []*Trial) int {
	n := 0
	for i, t := range trials {
		if t.Breakdown == nil || t.Breakdown.Split != SplitNone {
			continue
		}
		n++
		y := float64(len(trials) - 1 - i)
		end := 0.0
		for _, m := range f.marks {
			if m.shape == shapeRect && len(m.attrs) > 0 && m.attrs[0][1] == t.ID {
				end = max(end, m.x2)
			}
		}
		// after the bar, or inside it (white) when the bar is long
		x, dx, anchor, fill := end, vg.Points(4), "start", color.Color(colDark)
		if end > 0.55*f.p.X.Max {
			dx, anchor, fill = vg.Points(-4), "end", color.RGBA{255, 255, 255, 255}
		}
		f.marks = append(f.marks, mark{shape: shapeText, class: "label unsplit", x: x, y: y, r: vg.Points(8),
			dx: dx, dy: vg.Points(3), text: GraphNotSplit, fill: fill, anchor: anchor,
			attrs: trialAttrs(t), title: labelOf(t) + ": " + GraphNotSplit})
	}
	return n
}

func anySplit(trials []*Trial, split string) bool {
	for _, t := range trials {
		if t.Breakdown != nil && t.Breakdown.Split == split {
			return true
		}
	}
	return false
}
