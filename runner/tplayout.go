package runner

import (
	"fmt"

	"github.com/casestudy/casestudy/engine"
)

// tpDegree is cfg's tensor-parallel degree (1 without tp).
func tpDegree(cfg engine.Config) int {
	if cfg.TP == nil {
		return 1
	}
	return max(cfg.TP.Degree, 1)
}

// dataParallelOf is cfg's data-parallel size: its ranks over tp.degree x
// pipeline stages (ranks tensor-fastest, then data, then pipeline).
func dataParallelOf(cfg engine.Config) int {
	return max(cfg.Dist.WorldSize/(max(cfg.Pipeline.Stages, 1)*tpDegree(cfg)), 1)
}

// tpLayoutPhrase is "tensor parallel N x " for a tensor-parallel config, ""
// otherwise: the front of a layout's words.
func tpLayoutPhrase(c engine.Config) string {
	if tp := tpDegree(c); tp > 1 {
		return fmt.Sprintf("tensor parallel %d x ", tp)
	}
	return ""
}
