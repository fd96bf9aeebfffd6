package report

import (
	"fmt"

	"github.com/casestudy/casestudy/store"
)

// rehearsalTPChecksums compares the parameters of a tensor-parallel trial's
// ranks (rank = t + tp*(d + dp*p)) in two steps: the data-parallel replicas
// of each tensor shard (equal t and p) must be bit-identical, which names a
// broken data-parallel reduction; and, since the engine's checksum of a
// tensor rank is of the whole model (under a pipeline: of its stage's
// parameters) gathered over its tensor group in the one-rank layout
// (docs/tensor-parallel.md), the tensor ranks of a stage must agree too, which
// names a broken gather or shards updated apart.
func rehearsalTPChecksums(ranks []store.RankRecord, tp, dp, stages int) *RehearsalChecksums {
	c := &RehearsalChecksums{}
	stages, dp = max(stages, 1), max(dp, 1)
	byRank := map[int]string{}
	for _, r := range ranks {
		if r.Checksum != nil {
			byRank[r.Rank] = r.Checksum.Hash
		}
	}
	eq := true
	where := func(p int, s string) string {
		if stages > 1 {
			return fmt.Sprintf("stage %d, %s", p, s)
		}
		return s
	}
	for p := 0; p < stages && eq; p++ {
		base := tp * dp * p
		for t := 0; t < tp && eq; t++ {
			for d := 1; d < dp; d++ {
				k := t + tp*(d+dp*p)
				if byRank[k] == "" || byRank[k] != byRank[t+base] {
					eq = false
					c.Detail = where(p, fmt.Sprintf("tensor rank %d: replica %d (rank %d) differs from replica 0 (rank %d)", t, d, k, t+base))
					break
				}
			}
		}
		for t := 1; t < tp && eq; t++ {
			if byRank[t+base] == "" || byRank[t+base] != byRank[base] {
				eq = false
				c.Detail = where(p, fmt.Sprintf("tensor rank %d (rank %d) gathered other parameters than tensor rank 0 (rank %d): "+
					"every tensor rank's checksum is of its stage's parameters, gathered", t, t+base, base))
			}
		}
	}
	if eq {
		c.Detail = fmt.Sprintf("the %d tensor ranks x %d data-parallel replicas hold bit-identical parameters (each checksum of the whole model gathered over its tensor group)", tp, dp)
		if stages > 1 { // a stage's checksum is of its parameters, gathered over its tensor group
			c.Detail = fmt.Sprintf("the %d tensor ranks x %d data-parallel replicas of each of the %d stages hold bit-identical parameters "+
				"(each checksum of its stage's parameters gathered over its tensor group)", tp, dp, stages)
		}
	}
	if stages > 1 {
		c.ReplicasEqual = &eq
	} else {
		c.DataParallelEqual = &eq
	}
	return c
}
