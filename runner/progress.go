package runner

import (
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
