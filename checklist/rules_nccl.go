package checklist

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/provenance"
)

// NCCL evidence rules: a forced algorithm or protocol NCCL did not use.

var ncclRules = []*Rule{
	{
		ID: "nccl-forced-ignored", Title: "Forced NCCL algorithm or protocol not used", Chapter: 6, Severity: Error,
		Rationale: "NCCL_ALGO and NCCL_PROTO are requests: NCCL falls back to what the topology, the rank count or the " +
			"operation supports (and older releases ignore values they do not know). A trial forcing a value NCCL did " +
			"not use measured something else than its label says, so any conclusion about that value is wrong. " +
			"casestudy makes NCCL print its choices for every trial of a study that forces or sweeps nccl.* knobs (NCCL_DEBUG=INFO, " +
			"NCCL_DEBUG_SUBSYS with TUNING) and reads them from rank 0's log.",
		Needs: []string{"knobs nccl.algo, nccl.proto", "NCCL tuning lines (ranks[].nccl, or the rank logs)"},
		check: checkNCCLForcedIgnored,
	},
}

func checkNCCLForcedIgnored(c *evalContext) verdict {
	var ignored, used, unknown []string
	var trials []string
	for _, t := range c.run.ok {
		for _, knob := range []string{"nccl.algo", "nccl.proto"} {
			v := t.knob(knob)
			if v == "" || v == "auto" || v == "default" {
				continue
			}
			e := provenance.CheckForcedNCCL(knob, v, c.run.ncclTunings(t))
			line := fmt.Sprintf("%s: %s", t.ID, e)
			switch e.Status() {
			case provenance.NCCLNotUsed:
				ignored = append(ignored, line)
				trials = append(trials, t.ID)
			case provenance.NCCLUsed:
				used = append(used, line)
			default:
				unknown = append(unknown, t.ID)
			}
		}
	}
	switch {
	case len(ignored) > 0:
		return verdict{
			Status:   Finding,
			Message:  fmt.Sprintf("%d forced NCCL setting(s) did not take effect: those trials ran with NCCL's own choice", len(ignored)),
			Evidence: ignored,
			Trials:   trials,
			Recommendation: "drop the forced value from the sweep or change what blocks it (rank count, topology, NCCL version); " +
				"do not read those trials as measurements of the forced value",
		}
	case len(used) > 0:
		return pass("NCCL used every forced value: %s", strings.Join(used, "; "))
	case len(unknown) > 0:
		return na("NCCL printed no tuning lines for the trials forcing nccl.algo or nccl.proto (%s): nccl.debug set to VERSION or WARN, or NCCL_DEBUG_SUBSYS without TUNING",
			strings.Join(unknown, ", "))
	}
	return na("no completed trial forces nccl.algo or nccl.proto")
}
