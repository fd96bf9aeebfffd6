// Package ansi removes terminal escape sequences from captured tool output
// (nvidia-smi colours and bolds its topology matrix when it thinks it writes
// to a terminal), so that reports show text, not "\x1b[4m".
package ansi

import "regexp"

// escapes matches ECMA-48 control sequences: CSI (ESC [ ... final byte), OSC
// (ESC ] ... BEL or ESC \) and two-byte escapes (ESC and one of @-Z\-_).
var escapes = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)|\x1b[@-Z\\\\-_]")

// Strip returns s without terminal escape sequences.
func Strip(s string) string { return escapes.ReplaceAllString(s, "") }
