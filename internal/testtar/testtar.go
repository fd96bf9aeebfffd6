// Package testtar reads the committed .tgz records (results/reference,
// testdata) that tests check the estimates and reports against.
package testtar

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// Walk calls fn with the name and contents of every file in the gzipped tar
// at path, in the archive's order; any read error fails the test.
func Walk(t testing.TB, path string, fn func(name string, data []byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("testtar: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("testtar: %s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("testtar: %s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("testtar: %s: %s: %v", path, h.Name, err)
		}
		fn(h.Name, data)
	}
}
