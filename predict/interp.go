package predict

import (
	"fmt"
	"sort"
)

// Interpolated is a benchmark's measured all-reduce times themselves, joined
// by straight lines: a size between two measured sizes takes the linear
// interpolation of their times (each size's time the mean of its points);
// a size outside them, another op or another rank count asks Fallback (the
// alpha-beta fit to the same points). A line through every size cannot
// follow a collective whose bandwidth rises and then falls with the size
// (the host-staged all-reduce of 8 ranks on one GPU: 1.2, 2.3, 2.6, 1.8 GB/s
// of bus bandwidth at 1, 4, 16, 64 MiB on an H100 host, 2026-12-07); the
// measured points do (docs/predict.md, "(b) The one-GPU rehearsal").
type Interpolated struct {
	Ranks    int
	Points   []Point // ascending by size, one a size
	Source   string
	Fallback CostModel
}

// NewInterpolated is the interpolation of points (several of a size are
// averaged) measured on ranks; it needs two sizes.
func NewInterpolated(points []Point, ranks int, source string, fallback CostModel) (Interpolated, error) {
	sum, n := map[int64]float64{}, map[int64]int{}
	for _, p := range points {
		if p.Bytes <= 0 || p.MS <= 0 {
			return Interpolated{}, fmt.Errorf("interpolated model: point %d bytes, %g ms: both must be positive", p.Bytes, p.MS)
		}
		sum[p.Bytes] += p.MS
		n[p.Bytes]++
	}
	if len(sum) < 2 {
		return Interpolated{}, fmt.Errorf("interpolated model: needs at least two message sizes, got %d", len(sum))
	}
	out := Interpolated{Ranks: ranks, Source: source, Fallback: fallback}
	for b, s := range sum {
		out.Points = append(out.Points, Point{Bytes: b, MS: s / float64(n[b])})
	}
	sort.Slice(out.Points, func(i, j int) bool { return out.Points[i].Bytes < out.Points[j].Bytes })
	return out, nil
}

// Time implements CostModel.
func (m Interpolated) Time(op string, bytes int64, ranks int) (float64, string, error) {
	ps := m.Points
	if op == AllReduce && ranks == m.Ranks && len(ps) >= 2 && bytes >= ps[0].Bytes && bytes <= ps[len(ps)-1].Bytes {
		i := sort.Search(len(ps), func(i int) bool { return ps[i].Bytes >= bytes })
		if ps[i].Bytes == bytes {
			return ps[i].MS, "bench point", nil
		}
		return lerp(ps[i-1], ps[i], bytes), "interpolated", nil
	}
	if m.Fallback == nil {
		return 0, "", fmt.Errorf("interpolated model: %s of %d bytes on %d ranks is outside its points and there is no fallback", op, bytes, ranks)
	}
	return m.Fallback.Time(op, bytes, ranks)
}

// Name implements CostModel.
func (m Interpolated) Name() string {
	fb := "none"
	if m.Fallback != nil {
		fb = m.Fallback.Name()
	}
	return fmt.Sprintf("the measured points of %s, interpolated (outside them: %s)", m.Source, fb)
}

// LeaveOneOutError is the model's own evidence for a band: the largest
// relative error of each inner measured size's time interpolated from its two
// neighbours alone; false with no inner size (two sizes).
func (m Interpolated) LeaveOneOutError() (float64, bool) {
	ps := m.Points
	worst := 0.0
	for i := 1; i+1 < len(ps); i++ {
		e := (lerp(ps[i-1], ps[i+1], ps[i].Bytes) - ps[i].MS) / ps[i].MS
		worst = max(worst, e, -e)
	}
	return worst, len(ps) > 2
}

// lerp is the time at bytes on the line through a and b (a.Bytes < b.Bytes).
func lerp(a, b Point, bytes int64) float64 {
	f := float64(bytes-a.Bytes) / float64(b.Bytes-a.Bytes)
	return a.MS + f*(b.MS-a.MS)
}
