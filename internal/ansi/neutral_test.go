package ansi

import (
	"bytes"
	"testing"
)

// TestNeutralize (audit N18, A-8): OSC and CSI sequences, C1 controls and
// stray bytes from run data become visible text; newlines, tabs and
// ordinary Unicode stay.
func TestNeutralize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\tand a tab\n":       "plain text\tand a tab\n",
		"ëth0✓ RİNG":                    "ëth0✓ RİNG",
		"\x1b]0;TITLE\x07 red \x1b[31m": `\x1b]0;TITLE\x07 red \x1b[31m`,
		"c1 \u009b31m":                  `c1 \u009b31m`,
		"bad \xff byte\r":               `bad \xff byte\x0d`,
		"del\x7f":                       `del\x7f`,
	} {
		if got := Neutralize(in); got != want {
			t.Errorf("Neutralize(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	n, err := w.Write([]byte("x\x1b[2Jy\n"))
	if err != nil || n != 7 || b.String() != `x\x1b[2Jy`+"\n" {
		t.Errorf("Writer: %d %v %q", n, err, b.String())
	}
	b.Reset()
	e := []byte("ë✓")
	for _, part := range [][]byte{e[:1], e[1:3], e[3:]} { // characters split between writes
		_, _ = w.Write(part)
	}
	if b.String() != "ë✓" {
		t.Errorf("split characters: %q", b.String())
	}
}
