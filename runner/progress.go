package runner

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/casestudy/casestudy/internal/units"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// Progress hears about the sweep as it goes. TrialStart is called for every
// launch: n of total launches planned so far (a greedy sweep plans round by
// round), with the trial and which repeat it is.
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

// IsTerminal reports whether w is a character device (an interactive terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewProgress returns a single updating line on a terminal, else one plain
// line per event (nightly logs).
func NewProgress(w io.Writer, terminal bool) Progress {
	return &lineProgress{w: w, tty: terminal, begin: time.Now()}
}

type lineProgress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	begin   time.Time
	n       int
	total   int
	last    string
	current string
}

func (p *lineProgress) TrialStart(n, total int, rec *store.TrialRecord, repeat, repeats int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n, p.total = n, total
	p.current = fmt.Sprintf("%s [%s] repeat %d/%d", rec.ID, changedKnobs(rec), repeat+1, repeats)
	if p.tty {
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "launch %d/%d: trial %s\n", n, total, p.current)
}

func (p *lineProgress) TrialDone(rec *store.TrialRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = fmt.Sprintf("%s %s", rec.ID, resultText(rec))
	if p.tty {
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "trial %s done: %s\n", rec.ID, resultText(rec))
}

func (p *lineProgress) Log(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", msg)
		p.redraw()
		return
	}
	fmt.Fprintln(p.w, msg)
}

func (p *lineProgress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// redraw writes the single progress line: a bar, trial n/N, ETA, the trial
// in flight and the last result.
func (p *lineProgress) redraw() {
	const width = 20
	filled := 0
	if p.total > 0 {
		filled = min(width, width*(p.n-1)/p.total)
	}
	eta := "?"
	if p.n > 1 && p.total >= p.n {
		per := time.Since(p.begin) / time.Duration(p.n-1)
		eta = (per * time.Duration(p.total-p.n+1)).Round(time.Second).String()
	}
	line := fmt.Sprintf("[%s%s] %d/%d ETA %s | %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.n, p.total, eta, p.current)
	if p.last != "" {
		line += " | last: " + p.last
	}
	if len(line) > 200 {
		line = line[:197] + "..."
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

func changedKnobs(rec *store.TrialRecord) string {
	if len(rec.Changed) == 0 {
		return "baseline"
	}
	return study.FormatKnobs(rec.Knobs, slices.Sorted(slices.Values(rec.Changed)))
}

func resultText(rec *store.TrialRecord) string {
	switch {
	case rec.Outcome == store.OK && rec.Summary != nil:
		s := "ok " + ValueText(rec.Summary)
		if rec.Summary.Noisy {
			s += " (noisy)"
		}
		if rec.Throttled {
			s += " (throttled)"
		}
		return s
	case rec.Error != "":
		return fmt.Sprintf("%s: %s", rec.Outcome, firstLine(rec.Error))
	}
	return string(rec.Outcome)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// ValueText is a trial's one number as the terminal prints it: the summary's
// objective value (the report's estimator and formatter), "184012 tokens/s
// over 5 launches".
func ValueText(s *store.TrialSummary) string {
	if s.Unit == "" { // a record made before the summary had its value
		return units.Num(s.SamplesPerS) + " samples/s"
	}
	return fmt.Sprintf("%s %s over %d launches", units.Num(s.Value), s.Unit, s.Launches)
}
