package ansi

import "testing"

func TestStrip(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[4m\tGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18": "\tGPU0\tGPU1\nGPU0\t X \tNV18",
		"\x1b[1;31mred\x1b[m plain":                   "red plain",
		"\x1b]0;title\x07text":                        "text",
		"no escapes [4m here":                         "no escapes [4m here",
	} {
		if got := Strip(in); got != want {
			t.Errorf("Strip(%q) = %q, want %q", in, got, want)
		}
	}
}
