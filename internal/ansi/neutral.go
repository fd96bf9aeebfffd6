package ansi

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Neutralize makes s safe to print on a terminal: every control character
// other than newline and tab (C0, DEL and the C1 controls U+0080..U+009F,
// which start escape sequences: OSC retitles the window, CSI recolours it)
// is written as a visible Go escape (\x1b, \u009b). Run data shown on a
// terminal goes through it (audit N18); bytes that are not UTF-8 are shown
// as \xNN too.
func Neutralize(s string) string {
	if !needsNeutralizing(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsNeutralizing(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return true
		}
		i += size
	}
	return false
}

// Writer neutralizes everything written through it (Neutralize). A UTF-8
// character split between two writes (a buffered writer's flush) is held
// until the next write completes it.
type Writer struct {
	W       io.Writer
	pending []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{W: w} }

func (w *Writer) Write(p []byte) (int, error) {
	buf := append(w.pending, p...)
	w.pending = nil
	// hold an incomplete character at the end (at most 3 bytes)
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if c >= 0xc0 { // a lead byte: complete?
			if !utf8.FullRune(buf[len(buf)-k:]) {
				w.pending = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(w.W, Neutralize(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}
