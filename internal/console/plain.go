package console

import (
	"fmt"
	"io"
	"sync"

	"github.com/casestudy/casestudy/store"
)

// plain writes one line per event: for logs and pipes, where nothing may be
// overwritten.
type plain struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *plain) TrialStart(n, total int, rec *store.TrialRecord, repeat, repeats int) {
	p.printf("launch %d/%d: trial %s repeat %d/%d\n", n, total, TrialLabel(rec), repeat+1, repeats)
}

func (p *plain) TrialDone(rec *store.TrialRecord) {
	p.printf("trial %s done: %s\n", rec.ID, ResultText(rec))
}

func (p *plain) Log(msg string) { p.printf("%s\n", msg) }

func (p *plain) Close() {}

func (p *plain) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}
