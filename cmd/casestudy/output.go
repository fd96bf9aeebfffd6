package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// writeJSON is every command's --json output: v indented by two spaces, one
// trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// outputErr marks a failure to create or write an output file (permissions,
// a missing folder, a full disk) as the environment's: exit status 3, as run
// does for its run directory. Other errors pass unchanged.
func outputErr(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	if errors.As(err, &pe) || errors.As(err, &le) {
		return exitcode.With(exitcode.Environment, err)
	}
	return err
}
