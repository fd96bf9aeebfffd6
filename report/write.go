package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/ansi"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// Formats are the report formats and the files they write; the formats are
// study.ReportFormats, the list a study's report.formats is checked against.
var Formats = map[string]string{"html": "report.html", "md": "report.md", "json": "summary.json"}

// DefaultFormats is every format.
var DefaultFormats = study.ReportFormats

// ParseFormats checks a comma-separated format list ("html,md,json").
func ParseFormats(list string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		if _, err := fileOf(f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no report format given: use html, md or json (comma-separated)")
	}
	return out, nil
}

// fileOf is the file a format writes, or the error that names the formats.
func fileOf(format string) (string, error) {
	if name, ok := Formats[format]; ok {
		return name, nil
	}
	return "", fmt.Errorf("unknown report format %q: use html, md or json (comma-separated)", format)
}

// Write builds the summary of run and writes the requested formats
// (report.html, report.md, summary.json) into outDir ("" = the run
// directory). Each file is written whole (temp file, fsync, rename), so a
// reader never sees half a report. It returns the paths written.
func Write(run *store.Run, findings []checklist.Result, outDir string, formats []string) ([]string, error) {
	if outDir == "" {
		outDir = run.Dir
	}
	if outDir == "" {
		return nil, fmt.Errorf("report: no output folder: the run has no directory (store.Run.Dir) and none was given")
	}
	if len(formats) == 0 {
		formats = DefaultFormats
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report folder: %w", err)
	}
	s := Build(run, findings)
	pred, err := LoadPredicted(run)
	if err != nil {
		return nil, err
	}
	s.Predicted = pred
	if s.Profiles != nil && run.Dir != "" { // trace links are relative to the run directory
		if rel, err := filepath.Rel(outDir, run.Dir); err == nil && rel != "." {
			s.Profiles.LinkBase = filepath.ToSlash(rel)
		}
	}
	var paths []string
	if p, err := writeConfirm(s, run, outDir); err != nil {
		return paths, err
	} else if p != "" {
		paths = append(paths, p)
	}
	for _, f := range formats {
		name, err := fileOf(f)
		if err != nil {
			return paths, err
		}
		var buf bytes.Buffer
		if err := Render(&buf, s, f); err != nil {
			return paths, fmt.Errorf("rendering %s: %w", name, err)
		}
		p := filepath.Join(outDir, name)
		if err := store.WriteFileAtomic(p, buf.Bytes()); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Render writes s in one format: html, md or json.
func Render(w io.Writer, s *Summary, format string) error {
	if s.Kind == KindRehearsal && format != "json" {
		return renderRehearsal(w, s, format)
	}
	switch format {
	case "html":
		return WriteHTML(w, s)
	case "md":
		return WriteMarkdown(ansi.NewWriter(w), s) // a text file: no escape sequence from run data (audit N18)
	case "json":
		return WriteJSON(w, s)
	}
	return fmt.Errorf("unknown report format %q", format)
}

// WriteFile writes data to path whole (store.WriteFileAtomic); "-" is stdout.
func WriteFile(path string, data []byte, stdout io.Writer) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	return store.WriteFileAtomic(path, data)
}
