package runner

import (
	"fmt"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// countSamplesOnce makes a tensor-parallel launch's samples and tokens count
// once per data-parallel replica, as the throughput sums them over ranks
// (stats.Throughput, WindowThroughput, launchRate): the ranks of a tensor
// group train one micro-batch together, so only its tensor rank 0 (rank mod
// tp.degree == 0; ranks are tensor-fastest) keeps them, as a pipeline counts
// a replica's samples on its last stage only (pipeline.cpp). The other ranks'
// step samples, tokens and per-step rates are set to 0: a no-op where the
// engine reports them on tensor rank 0 alone.
func countSamplesOnce(sp *trialSpec, ranks []store.RankRecord) {
	if len(sp.Configs) == 0 {
		return
	}
	tp := tpDegree(sp.Configs[0])
	if tp <= 1 {
		return
	}
	for i := range ranks {
		if ranks[i].Rank%tp == 0 {
			continue
		}
		for j := range ranks[i].Steps {
			s := &ranks[i].Steps[j]
			s.Samples, s.Tokens, s.SamplesPerS, s.TokensPerS = 0, 0, 0, 0
		}
	}
}

// tpLayoutPhrase is "tensor parallel N x " for a tensor-parallel config, ""
// otherwise: the front of a layout's words.
func tpLayoutPhrase(c engine.Config) string {
	if tp := tpDegree(c); tp > 1 {
		return fmt.Sprintf("tensor parallel %d x ", tp)
	}
	return ""
}
