package bench

import (
	"fmt"

	"github.com/casestudy/casestudy/stats"
)

// rankCompute is one rank's compute loops of one size (bench_comm.cpp's
// "compute"): per pair, the loop alone, the loop beside Collectives
// all-reduces issued spread over it, and those collectives' summed time.
type rankCompute struct {
	Collectives int       `json:"collectives"`
	Reps        int       `json:"reps"`
	AloneMS     []float64 `json:"alone_ms"`
	BesideMS    []float64 `json:"beside_ms"`
	CommMS      []float64 `json:"comm_ms"`
}

// ComputeRow is what a collective of one size costs the compute beside it
// on CPU ranks (bench allreduce --interference): the compute loses a
// fraction f of its pace while a collective runs beside it (the
// communicator's thread takes the cores it shares with the compute), so a
// loop overlapped by the collectives for o ms takes f·o longer than alone:
// f = (beside − alone) / o, o = min(the collectives' time, the loop beside
// them); a collective of time T costs StealMS = f·T of compute. Per rank the
// median over pairs; StealMS and CommMS are the mean over ranks of those (the
// simulator stretches each rank's backward by it, predict.Options.Stretch).
type ComputeRow struct {
	Collectives int     `json:"collectives"`    // all-reduces queued beside each loop
	Pairs       int     `json:"pairs"`          // loops alone and beside, per rank
	AloneMS     float64 `json:"loop_alone_ms"`  // the loop alone (median over ranks and pairs)
	BesideMS    float64 `json:"loop_beside_ms"` // the loop beside the collectives (median)
	CommMS      float64 `json:"comm_ms"`        // one collective's time beside the loop
	StealMS     float64 `json:"steal_ms"`       // the compute one collective costs (may be < 0: noise)
	Fraction    float64 `json:"fraction"`       // StealMS / CommMS: the pace the compute loses while it runs
}

// combineCompute is a size's ComputeRow from every rank's loops.
func combineCompute(ranks []*rankCompute, bytes int64) (ComputeRow, error) {
	var row ComputeRow
	var alone, beside []float64
	for k, rc := range ranks {
		if rc == nil || rc.Collectives < 1 || len(rc.AloneMS) == 0 || len(rc.BesideMS) != len(rc.AloneMS) || len(rc.CommMS) != len(rc.BesideMS) {
			return ComputeRow{}, fmt.Errorf("rank %d: no compute loops (or unpaired ones) for %d bytes: an engine without compute_pairs?", k, bytes)
		}
		if k > 0 && rc.Collectives != row.Collectives {
			return ComputeRow{}, fmt.Errorf("rank %d queued %d collectives beside its loop for %d bytes, rank 0 %d", k, rc.Collectives, bytes, row.Collectives)
		}
		row.Collectives, row.Pairs = rc.Collectives, len(rc.AloneMS)
		m := float64(rc.Collectives)
		steal, comm := make([]float64, len(rc.AloneMS)), make([]float64, len(rc.AloneMS))
		for j := range rc.AloneMS {
			o := min(rc.CommMS[j], rc.BesideMS[j])
			if o <= 0 {
				return ComputeRow{}, fmt.Errorf("rank %d pair %d for %d bytes: no overlap (collectives %.3f ms, loop %.3f ms)", k, j, bytes, rc.CommMS[j], rc.BesideMS[j])
			}
			comm[j] = rc.CommMS[j] / m
			steal[j] = (rc.BesideMS[j] - rc.AloneMS[j]) / o * comm[j]
		}
		row.StealMS += stats.DescribeOf(steal).Median / float64(len(ranks))
		row.CommMS += stats.DescribeOf(comm).Median / float64(len(ranks))
		alone, beside = append(alone, rc.AloneMS...), append(beside, rc.BesideMS...)
	}
	row.AloneMS, row.BesideMS = stats.DescribeOf(alone).Median, stats.DescribeOf(beside).Median
	if row.CommMS > 0 {
		row.Fraction = row.StealMS / row.CommMS
	}
	return row, nil
}
