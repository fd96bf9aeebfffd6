package store

import (
	"fmt"
	"unicode/utf8"
)

// ErrorLimit caps the error text of a record and of each of its launches:
// an engine or rank may say anything (a rank's line on the rendezvous may be
// 16 MiB), and a 63 MB error became a 786 MB report (audit N23). The whole
// text stays in the rank's log.
const ErrorLimit = 16 << 10

// capErrors cuts rec's error texts to ErrorLimit.
func capErrors(rec *TrialRecord) {
	rec.Error = capText(rec.Error)
	for i := range rec.Repeats {
		rec.Repeats[i].Error = capText(rec.Repeats[i].Error)
	}
}

func capText(s string) string {
	if len(s) <= ErrorLimit {
		return s
	}
	cut := ErrorLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes: see the rank's log)", len(s)-cut)
}
