package checklist

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// ncclChoice is how often NCCL chose each algorithm and protocol for the
// all-reduces of a trial, from rank 0's tuning lines.
type ncclChoice struct {
	Algo  map[string]int // upper case: RING, TREE, NVLS ...
	Proto map[string]int // LL, LL128, SIMPLE
	N     int
}

// ncclTunings are the NCCL choices of every rank of every repeat of t: as the
// runner recorded them, else (runs recorded before it did) parsed from the
// rank's log.
func (v *runView) ncclTunings(t *trial) []*store.NCCLTuning {
	var out []*store.NCCLTuning
	for _, rp := range t.rec.Repeats {
		for _, rk := range rp.Ranks {
			tn := rk.NCCL
			if tn == nil && v.run.Dir != "" {
				tn = provenance.ReadNCCLTuning(filepath.Join(v.run.Dir, store.LogName(t.ID, rk.Rank, rp.Repeat)))
			}
			if tn != nil {
				out = append(out, tn)
			}
		}
	}
	return out
}

// ncclChoices counts the all-reduce choices of t (nil when no tuning line was
// logged).
func (v *runView) ncclChoices(t *trial) *ncclChoice {
	ch := &ncclChoice{Algo: map[string]int{}, Proto: map[string]int{}}
	for _, tn := range v.ncclTunings(t) {
		for _, c := range tn.Choices {
			if c.Op != "" && c.Op != "AllReduce" {
				continue
			}
			ch.Algo[c.Algo] += c.Count
			ch.Proto[c.Proto] += c.Count
			ch.N += c.Count
		}
	}
	if ch.N == 0 {
		return nil
	}
	return ch
}

// only returns the single value NCCL chose every time ("" when it varied).
func only(counts map[string]int) string {
	if len(counts) != 1 {
		return ""
	}
	for k := range counts {
		return k
	}
	return ""
}

func (c *ncclChoice) String() string {
	var parts []string
	for _, k := range sortedKeys(c.Algo) {
		parts = append(parts, k+"×"+strconv.Itoa(c.Algo[k]))
	}
	var protos []string
	for _, k := range sortedKeys(c.Proto) {
		protos = append(protos, k+"×"+strconv.Itoa(c.Proto[k]))
	}
	return "algo " + strings.Join(parts, " ") + ", proto " + strings.Join(protos, " ")
}
