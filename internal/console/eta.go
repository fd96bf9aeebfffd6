package console

import (
	"time"

	"github.com/casestudy/casestudy/timeline"
)

// eta estimates the time a sweep has left from the launches that ended: their
// mean duration (from the first launch's start to the last one's end, set-up
// between launches included) times the launches still to run, less what the
// launch in flight has already taken. Unknown until one launch has ended.
type eta struct {
	started, ended, total int
	first, lastStart      time.Time
	lastEnd               time.Time
}

// start: launch n of total begins (launches before it have ended).
func (e *eta) start(n, total int, now time.Time) {
	if e.first.IsZero() {
		e.first = now
	}
	if n-1 > e.ended {
		e.ended, e.lastEnd = n-1, now
	}
	e.started, e.total, e.lastStart = n, total, now
}

// end: the launch in flight ended.
func (e *eta) end(now time.Time) {
	if e.started > e.ended {
		e.ended, e.lastEnd = e.started, now
	}
}

// left is the estimate; ok is false before the first launch ended.
func (e *eta) left(now time.Time) (d time.Duration, ok bool) {
	if e.ended == 0 {
		return 0, false
	}
	d = timeline.ETA(e.lastEnd.Sub(e.first), e.ended, e.total) // the pace of the ended launches, as casestudy status
	if e.started > e.ended {                                   // in flight
		d -= now.Sub(e.lastStart)
	}
	return max(d, 0), true
}

func (e *eta) text(now time.Time) string {
	d, ok := e.left(now)
	if !ok {
		return "?"
	}
	return Duration(d)
}
