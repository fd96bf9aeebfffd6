package main

import (
	"encoding/json"
	"io"
)

// writeJSON is every command's --json output: v indented by two spaces, one
// trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
