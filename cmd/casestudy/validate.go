package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/study"
)

func init() { register(newValidateCommand) }

type validateOptions struct {
	allowOutside bool
	maxTrials    int
	json         bool
}

// validateReport is `casestudy validate --json`.
type validateReport struct {
	Files []validatedFile `json:"files"`
	Bad   int             `json:"bad"` // files with problems (exit status 2 when any)
}

type validatedFile struct {
	Path     string        `json:"path"`
	OK       bool          `json:"ok"`
	Trials   int           `json:"trials"`
	Dropped  int           `json:"dropped"`
	Problems []problemJSON `json:"problems,omitempty"`
}

// problemJSON is one problem of a study file (line and col 0 when unknown).
type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

func problemsOf(path string, err error) []problemJSON {
	var se *study.Error
	if !errors.As(err, &se) {
		return []problemJSON{{File: path, Message: err.Error()}}
	}
	out := make([]problemJSON, len(se.Problems))
	for i, p := range se.Problems {
		out[i] = problemJSON{File: p.Pos.File, Line: p.Pos.Line, Col: p.Pos.Col, Message: p.Msg}
	}
	return out
}

func newValidateCommand() *cobra.Command {
	var opts validateOptions
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check study files (keys, types, knob values, extends, sweep size) without running anything",
		Long: "validate loads each study file and the files it extends, checks it against the knob registry and " +
			"expands its sweep, printing every problem as file:line:col: message. It runs nothing. " +
			"Arguments may be directories (every .yaml under them) or quoted patterns with ** " +
			"('studies/**/*.yaml'). The exit status is 2 when any file has a problem.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.allowOutside, "allow-outside", false, "let extends reach files outside the studies tree")
	cmd.Flags().IntVar(&opts.maxTrials, "max-trials", study.DefaultMaxTrials, "largest sweep a study may expand to")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON report on standard output (problems with file, line and column)")
	return cmd
}

func runValidate(stdout, stderr io.Writer, args []string, opts validateOptions) error {
	if opts.maxTrials < 1 {
		return exitcode.Usage(fmt.Errorf("--max-trials must be at least 1, got %d", opts.maxTrials))
	}
	files, err := studyFiles(args)
	if err != nil {
		return exitcode.Usage(err)
	}
	rep := validateReport{Files: []validatedFile{}}
	for _, f := range files {
		s, err := loadStudy(f, opts.allowOutside)
		var plan *study.Plan
		if err == nil {
			plan, err = study.Expand(s, study.ExpandOptions{MaxTrials: opts.maxTrials})
		}
		if err != nil {
			rep.Bad++
			rep.Files = append(rep.Files, validatedFile{Path: f, Problems: problemsOf(f, err)})
			if !opts.json {
				fmt.Fprintln(stderr, err)
			}
			continue
		}
		rep.Files = append(rep.Files, validatedFile{Path: f, OK: true, Trials: len(plan.Trials), Dropped: len(plan.Dropped)})
		if !opts.json {
			fmt.Fprintf(stdout, "ok  %s  (%s, %d dropped)\n", f, plural(len(plan.Trials), "trial"), len(plan.Dropped))
		}
	}
	if opts.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	}
	if rep.Bad > 0 {
		if !opts.json {
			fmt.Fprintf(stderr, "%d of %d study files have problems\n", rep.Bad, len(files))
		}
		return exitcode.Silent{Code: exitcode.Input}
	}
	return nil
}

// loadStudy loads a study and checks its checklist section against the rule
// registry (unknown rule IDs and threshold names are input errors).
func loadStudy(path string, allowOutside bool) (*study.Study, error) {
	s, err := study.Load(path, study.LoadOptions{AllowOutside: allowOutside})
	if err != nil {
		return nil, err
	}
	if ps := configOf(s).Problems(); len(ps) > 0 {
		se := &study.Error{}
		for _, p := range ps {
			se.Problems = append(se.Problems, study.Problem{Pos: s.Checklist.Pos(p.Rule, p.Threshold, p.Disable), Msg: p.Msg})
		}
		sort.SliceStable(se.Problems, func(i, j int) bool {
			a, b := se.Problems[i].Pos, se.Problems[j].Pos
			return a.File == b.File && (a.Line < b.Line || a.Line == b.Line && a.Col < b.Col)
		})
		return nil, se
	}
	return s, nil
}

// plural writes "1 trial", "2 trials".
func plural(n int, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// studyFiles expands the arguments: files as given, directories to every
// .yaml/.yml under them, and glob patterns where ** matches any directories.
func studyFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, statErr := os.Stat(a)
		switch {
		case statErr == nil && fi.IsDir():
			found, err := walkMatching(a, regexp.MustCompile(`\.ya?ml$`))
			if err != nil {
				return nil, err
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%s: no .yaml files in this directory", a)
			}
			out = append(out, found...)
		case statErr == nil:
			out = append(out, a)
		case strings.ContainsAny(a, "*?["):
			found, err := globFiles(a)
			if err != nil {
				return nil, err
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%s: no file matches this pattern", a)
			}
			out = append(out, found...)
		default:
			out = append(out, a) // Load reports it, with the others
		}
	}
	return out, nil
}

// globFiles matches a pattern with *, ?, [...] and ** (any directories).
func globFiles(pattern string) ([]string, error) {
	pattern = filepath.ToSlash(filepath.Clean(pattern))
	root := "."
	if i := strings.IndexAny(pattern, "*?["); i > 0 {
		if j := strings.LastIndex(pattern[:i], "/"); j >= 0 {
			root = pattern[:j]
			if root == "" {
				root = "/"
			}
		}
	}
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case strings.HasPrefix(pattern[i:], "**/"):
			re.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(pattern[i:], "**"):
			re.WriteString(".*")
			i++
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("%s: unclosed [ in pattern", pattern)
			}
			re.WriteString(pattern[i : i+j+1])
			i += j
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	m, err := regexp.Compile(re.String())
	if err != nil {
		return nil, fmt.Errorf("%s: bad pattern: %v", pattern, err)
	}
	if _, err := os.Stat(root); err != nil {
		return nil, nil
	}
	return walkMatching(root, m)
}

func walkMatching(root string, m *regexp.Regexp) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && m.MatchString(filepath.ToSlash(p)) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
