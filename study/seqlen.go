package study

import (
	"fmt"
	"strconv"

	"github.com/casestudy/casestudy/engine"
)

// seqLenReason drops a trial whose seq_len exceeds the positions of the
// model's preset ("" when it fits or is unknown): the engine refuses it at
// every launch, so the plan says so before anything runs (audit N20).
func (s *Study) seqLenReason(values map[string]string) string {
	v, ok := values["seq_len"]
	if !ok {
		return ""
	}
	n, err := strconv.Atoi(v)
	max := engine.Positions(s.Model.Family, s.Model.Preset)
	if err != nil || max == 0 || n <= max {
		return ""
	}
	return fmt.Sprintf("seq_len %d exceeds the %d positions of %s %s", n, max, s.Model.Family, s.Model.Preset)
}
