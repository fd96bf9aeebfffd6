package store

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Readers open only regular files, without blocking, and read at most a
// cap: a FIFO where a run file belongs would block every reader, and a link
// to /dev/zero would grow memory without bound (audit N8).

// ManifestLimit caps manifest.json (a 20,000-trial plan with its study's
// sources is a few MB).
const ManifestLimit = 256 << 20

// LineLimit caps one line of trials.jsonl (one trial's record).
const LineLimit = 256 << 20

var lineLimit = LineLimit // tests lower it

// OpenRegular opens path for reading when it is a regular file (following
// symbolic links), without blocking on a FIFO; anything else is an error
// that names the file and what it is.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s, not a regular file: casestudy reads only regular files", path, kindOf(st.Mode()))
	}
	return f, nil
}

// ReadRegular reads a regular file whole, refusing one larger than limit.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB: not a file casestudy wrote", path, limit>>20)
	}
	return b, nil
}

func kindOf(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.String() + ")"
}
