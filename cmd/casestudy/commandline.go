package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/launch"
)

// The commands casestudy prints (resume a run, re-run a trial, write a
// report) run as printed from any folder: the program as it was invoked
// (absolute unless found through $PATH), absolute paths, and the flags of
// this invocation that the command needs.

// self is how to call this program again.
func self() string {
	arg0 := os.Args[0]
	if !strings.ContainsRune(arg0, os.PathSeparator) {
		return arg0 // found through $PATH: it will be again
	}
	if abs, err := filepath.Abs(arg0); err == nil {
		return abs
	}
	return arg0
}

// commandLine is self followed by args, each quoted for a POSIX shell.
func commandLine(args ...string) string {
	parts := []string{launch.ShellQuote(self())}
	for _, a := range args {
		parts = append(parts, launch.ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// absPath makes a path absolute for a printed command ("" stays "").
func absPath(p string) string {
	if p == "" {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// pathAnnotation marks a flag whose value is a path (markPath).
const pathAnnotation = "casestudy_path"

// markPath marks flag name of f as a path: printed commands make it absolute.
func markPath(f *pflag.FlagSet, name string) {
	_ = f.SetAnnotation(name, pathAnnotation, []string{"true"})
}

// setFlags are the flags given on this command line, as --name=value, minus
// those in skip; the values of path flags (markPath) are made absolute.
func setFlags(cmd *cobra.Command, skip ...string) []string {
	var out []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		for _, s := range skip {
			if f.Name == s {
				return
			}
		}
		_, isPath := f.Annotations[pathAnnotation]
		value := func(v string) string {
			if isPath {
				return absPath(v)
			}
			return v
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+value(v))
			}
			return
		}
		out = append(out, "--"+f.Name+"="+value(f.Value.String()))
	})
	return out
}
