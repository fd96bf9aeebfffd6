package study

import (
	"fmt"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// Pos is a place in a study file; Line and Col are 1-based, 0 when unknown.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line > 0:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	case p.File != "":
		return p.File
	}
	return "study"
}

// Problem is one thing wrong with a study.
type Problem struct {
	Pos Pos
	Msg string
}

func (p Problem) String() string { return p.Pos.String() + ": " + p.Msg }

// Error lists every problem found in a study (all of them, not just the
// first), one per line as file:line:col: message. Its exit status is 2.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// ExitCode makes internal/exitcode.Of report bad input (2).
func (e *Error) ExitCode() int { return exitcode.Input }

// problems collects Problems while a file is read.
type problems struct{ list []Problem }

func (ps *problems) add(pos Pos, format string, args ...any) {
	ps.list = append(ps.list, Problem{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// err returns the collected problems as an *Error (sorted by place), or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := append([]Problem(nil), ps.list...)
	rank := map[string]int{} // files in the order they were read
	for _, p := range list {
		if _, ok := rank[p.Pos.File]; !ok {
			rank[p.Pos.File] = len(rank)
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i].Pos, list[j].Pos
		if a.File != b.File {
			return rank[a.File] < rank[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	// Drop exact duplicates (an alias read twice reports once).
	out := list[:0]
	for i, p := range list {
		if i > 0 && p == list[i-1] {
			continue
		}
		out = append(out, p)
	}
	return &Error{Problems: out}
}

// didYouMean formats a suggestion suffix, "" when there is none.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", s)
}
