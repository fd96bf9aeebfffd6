package report

import (
	"fmt"

	"github.com/casestudy/casestudy/store"
)

// rehearsalTPChecksums compares the parameters of a tensor-parallel trial's
// ranks: each rank holds its tensor rank's shard (rank = t + tp*(d + dp*p)),
// so only the data-parallel replicas of the same shard (equal t and p) must
// be bit-identical; shards of different tensor ranks differ by design.
func rehearsalTPChecksums(ranks []store.RankRecord, tp, dp, stages int) *RehearsalChecksums {
	c := &RehearsalChecksums{}
	stages = max(stages, 1)
	if dp <= 1 {
		c.Detail = fmt.Sprintf("one data-parallel replica of each of the %d tensor shards: nothing to compare (the shards differ by design)", tp*stages)
		return c
	}
	byRank := map[int]string{}
	for _, r := range ranks {
		if r.Checksum != nil {
			byRank[r.Rank] = r.Checksum.Hash
		}
	}
	eq := true
	c.Detail = fmt.Sprintf("the %d data-parallel replicas of each of the %d tensor shards hold bit-identical parameters", dp, tp*stages)
	for p := 0; p < stages && eq; p++ {
		for t := 0; t < tp && eq; t++ {
			first := t + tp*dp*p
			for d := 1; d < dp; d++ {
				k := t + tp*(d+dp*p)
				if byRank[k] == "" || byRank[k] != byRank[first] {
					eq = false
					c.Detail = fmt.Sprintf("tensor rank %d: replica %d (rank %d) differs from replica 0 (rank %d)", t, d, k, first)
					if stages > 1 {
						c.Detail = fmt.Sprintf("stage %d, %s", p, c.Detail)
					}
					break
				}
			}
		}
	}
	if stages > 1 {
		c.ReplicasEqual = &eq
	} else {
		c.DataParallelEqual = &eq
	}
	return c
}
