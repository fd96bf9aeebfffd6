package report

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/internal/units"
	knobreg "github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/store"
)

// Layout is how a trial's ranks split the model and the data: tensor-
// fastest, then data, then pipeline (rank = t + TP*(d + DP*p)), and the ZeRO
// stage sharding the optimizer states (and gradients) over the data-parallel
// ranks. Set for the trials that shard model states (tp.degree > 1 or
// zero.stage > 0), whose memory per rank the report shows.
type Layout struct {
	World int  `json:"world"`
	TP    int  `json:"tp"`
	DP    int  `json:"dp"`
	PP    int  `json:"pp"`
	Zero  int  `json:"zero_stage,omitempty"`
	SP    bool `json:"sequence_parallel,omitempty"`
}

// layoutOf reads a trial's layout from its knobs and its ranks' world size;
// nil for one rank or a layout that shards nothing (plain data parallel,
// pipeline stages).
func layoutOf(rec *store.TrialRecord) *Layout {
	world := 0
	for _, r := range rec.Repeats {
		world = max(world, len(r.Ranks))
		for _, rk := range r.Ranks {
			if rk.Info != nil {
				world = max(world, rk.Info.WorldSize)
			}
		}
	}
	if world <= 1 {
		return nil
	}
	l := knobreg.LayoutOf(rec.Knobs, world)
	out := &Layout{World: world, TP: l.TP, DP: l.DP, PP: l.PP, Zero: atoiOr(rec.Knobs["zero.stage"], 0),
		SP: rec.Knobs["tp.sequence_parallel"] == "true"}
	if !out.Sharded() {
		return nil
	}
	return out
}

// Sharded reports whether the layout splits model states across ranks
// (tensor parallelism or ZeRO): then each rank's memory is worth showing.
func (l *Layout) Sharded() bool { return l != nil && (l.TP > 1 || l.Zero > 0) }

// String is "tp 2 (sequence parallel) x dp 4 x pp 1, zero.stage 1".
func (l *Layout) String() string {
	if l == nil {
		return "one rank"
	}
	tp := fmt.Sprintf("tp %d", l.TP)
	if l.SP {
		tp += " (sequence parallel)"
	}
	s := fmt.Sprintf("%s x dp %d x pp %d", tp, l.DP, l.PP)
	if l.Zero > 0 {
		s += fmt.Sprintf(", zero.stage %d", l.Zero)
	}
	return s
}

// writeRankMemoryMD is report.md's per-rank memory of the trials that shard
// model states (tensor parallelism, ZeRO): what each rank held and peaked at,
// so that the shards' balance and what sharding saved are read per rank.
func writeRankMemoryMD(b *strings.Builder, ok []*Trial) {
	var rows []*Trial
	for _, t := range ok {
		if t.Layout.Sharded() && t.Memory != nil && len(t.Memory.Ranks) > 0 {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Memory per rank (tensor parallel and ZeRO trials)\n\n")
	mdRow(b, []string{"configuration", "trial", "layout", "per rank: held / peak allocated"})
	mdRow(b, []string{"---", "---", "---", "---"})
	for _, t := range rows {
		var cells []string
		for _, r := range t.Memory.Ranks {
			if t.Memory.NA != "" {
				cells = append(cells, fmt.Sprintf("rank %d %s peak allocated", r.Rank, units.Bytes(r.PeakAllocatedBytes)))
				continue
			}
			cells = append(cells, fmt.Sprintf("rank %d %s / %s", r.Rank, units.Bytes(r.HeldBytes), units.Bytes(r.PeakAllocatedBytes)))
		}
		if t.Memory.NA != "" {
			cells = append(cells, t.Memory.NA)
		}
		mdRow(b, []string{labelOf(t), t.ID, t.Layout.String(), strings.Join(cells, "; ")})
	}
	b.WriteString("\nHeld: reserved by the caching allocator at its peak in a step; peak allocated: live tensors " +
		"(maxima over each rank's steps in clean launches). Ranks are tensor-fastest: rank = t + tp x (d + dp x p).\n\n")
}
