package console

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
)

// NewProgress returns the live display on a terminal, else plain lines.
func NewProgress(w io.Writer, terminal bool) runner.Progress {
	if terminal {
		return newLive(w, 200*time.Millisecond)
	}
	return &plain{w: w}
}

// live is one progress bar (launch n of N, elapsed time, ETA, the trial in
// flight) at the bottom of the terminal; each trial's result and every log
// line is printed above it, so nothing is overwritten.
type live struct {
	p       *mpb.Progress
	refresh chan any      // a send renders the display (mpb's manual refresh)
	stop    chan struct{} // ends the ticker

	barMu sync.Mutex // mpb calls are made under barMu, never under mu
	bar   *mpb.Bar

	mu      sync.Mutex // what the decorators read, on mpb's goroutines
	now     func() time.Time
	begin   time.Time
	eta     eta
	current string
}

// newLive renders every period (never when 0: tests call render).
func newLive(w io.Writer, period time.Duration, opts ...mpb.ContainerOption) *live {
	l := &live{now: time.Now, refresh: make(chan any), stop: make(chan struct{})}
	l.begin = l.now()
	l.p = mpb.New(append([]mpb.ContainerOption{mpb.WithOutput(w), mpb.WithManualRefresh(l.refresh)}, opts...)...)
	if period > 0 {
		go func() {
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					l.render()
				case <-l.stop:
					return
				}
			}
		}()
	}
	return l
}

// render draws the display now, with every line printed before it.
func (l *live) render() { l.refresh <- time.Now() }

func (l *live) TrialStart(n, total int, rec *store.TrialRecord, repeat, repeats int) {
	l.mu.Lock()
	l.eta.start(n, total, l.now())
	l.current = truncate(fmt.Sprintf("trial %s repeat %d/%d", TrialLabel(rec), repeat+1, repeats), 72)
	l.mu.Unlock()
	l.barMu.Lock()
	defer l.barMu.Unlock()
	if l.bar == nil {
		// total 0: the bar completes only when Close says so, as a greedy
		// sweep's total grows round by round
		l.bar = l.p.New(0, mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
			mpb.BarWidth(24),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return l.text(l.counter) })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return l.text(l.times) })))
	}
	l.bar.SetTotal(int64(total), false)
	l.bar.SetCurrent(int64(n - 1))
}

func (l *live) TrialDone(rec *store.TrialRecord) {
	l.mu.Lock()
	if len(rec.Repeats) > 0 {
		l.eta.end(l.now())
	}
	ended := l.eta.ended
	l.mu.Unlock()
	l.barMu.Lock()
	if l.bar != nil {
		l.bar.SetCurrent(int64(ended))
	}
	l.barMu.Unlock()
	l.println(fmt.Sprintf("trial %s done: %s", rec.ID, ResultText(rec)))
}

func (l *live) Log(msg string) { l.println(msg) }

// Close removes the bar; what was printed above it stays (a last render
// prints the lines mpb still holds).
func (l *live) Close() {
	close(l.stop)
	l.barMu.Lock()
	if l.bar != nil {
		l.bar.Abort(true)
	}
	l.barMu.Unlock()
	l.render()
	l.p.Wait()
}

// println prints a line above the bar (mpb holds it until its next refresh).
func (l *live) println(line string) { _, _ = l.p.Write([]byte(line + "\n")) }

// text calls f under the lock (decorators run on mpb's goroutine).
func (l *live) text(f func() string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return f()
}

func (l *live) counter() string {
	return fmt.Sprintf("launch %d/%d", l.eta.started, l.eta.total)
}

func (l *live) times() string {
	now := l.now()
	return fmt.Sprintf("%s elapsed, ETA %s  %s", Duration(now.Sub(l.begin)), l.eta.text(now), l.current)
}

// Duration is d rounded for people: 42s, 3m05s, 1h02m.
func Duration(d time.Duration) string {
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
