package runner

import (
	"fmt"

	"github.com/casestudy/casestudy/internal/units"
	"github.com/casestudy/casestudy/store"
)

// Progress hears about the sweep as it goes. TrialStart is called for every
// launch: n of total launches planned so far (a greedy sweep plans round by
// round, and a trial that fails skips its remaining repeats), with the trial
// and which repeat it is. TrialDone follows each committed record. The
// terminal and plain-line displays are in internal/console.
type Progress interface {
	TrialStart(n, total int, rec *store.TrialRecord, repeat, repeats int)
	TrialDone(rec *store.TrialRecord)
	Log(msg string)
	Close()
}

type nopProgress struct{}

func (nopProgress) TrialStart(int, int, *store.TrialRecord, int, int) {}
func (nopProgress) TrialDone(*store.TrialRecord)                      {}
func (nopProgress) Log(string)                                        {}
func (nopProgress) Close()                                            {}

// ValueText is a trial's one number as the terminal prints it: the summary's
// objective value (the report's estimator and formatter), "184012 tokens/s
// over 5 launches".
func ValueText(s *store.TrialSummary) string {
	if s.Unit == "" { // a record made before the summary had its value
		return units.Num(s.SamplesPerS) + " samples/s"
	}
	return fmt.Sprintf("%s %s over %d launches", units.Num(s.Value), s.Unit, s.Launches)
}
