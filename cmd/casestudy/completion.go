package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// Shell completion (`casestudy completion bash|zsh|fish|powershell`) of what
// the commands take: study files, run directories, trial IDs, knob names,
// formats and severities. Cobra completes the commands and flag names.

// addCompletions attaches the completion functions to the command tree.
func addCompletions(root *cobra.Command) {
	args := map[string]cobra.CompletionFunc{
		"run": completeStudyFiles, "plan": completeStudyFiles, "validate": completeStudyFiles,
		"check": completeRunDirs, "report": completeRunDirs, "status": completeRunDirs, "baseline": completeRunDirs,
		"export": completeRunsOrBaselines, "compare": completeRunsOrBaselines, "history": completeStudyResults,
		"knobs": completeKnobNames, "models": fixed(study.Families...),
	}
	severities := []string{string(checklist.Info), string(checklist.Warning), string(checklist.Error)}
	flags := map[string]map[string]cobra.CompletionFunc{
		"run": {"trial": completeTrialIDs, "resume": completeRunDirs, "launcher": fixed("local", "slurm"),
			"out": completeDirs},
		"check":   {"fail-on": fixed(severities...), "study": completeStudyFiles},
		"report":  {"format": completeList(slices.Sorted(maps.Keys(report.Formats))...), "study": completeStudyFiles, "out": completeDirs},
		"compare": {"format": fixed(report.CompareFormats...), "inconclusive": fixed("fail", "pass"), "history": completeDirs},
		"history": {"format": fixed(report.HistoryFormats...)},
		"export":  {"format": fixed("benchfmt", "csv")},
		"doctor":  {"out": completeDirs},
	}
	for _, c := range root.Commands() {
		if f, ok := args[c.Name()]; ok {
			c.ValidArgsFunction = f
		}
		for name, f := range flags[c.Name()] {
			if err := c.RegisterFlagCompletionFunc(name, f); err != nil {
				panic("completion: " + c.Name() + " --" + name + ": " + err.Error())
			}
		}
	}
}

// fixed completes one of choices.
func fixed(choices ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(choices, cobra.ShellCompDirectiveNoFileComp)
}

// completeList completes a comma-separated list of choices ("html,md,json"):
// what is typed so far, followed by each choice not yet in it.
func completeList(choices ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			done, last = toComplete[:i+1], toComplete[i+1:]
		}
		var out []cobra.Completion
		for _, c := range choices {
			if strings.HasPrefix(c, last) && !slices.Contains(strings.Split(done, ","), c) {
				out = append(out, done+c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

func completeStudyFiles(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return []cobra.Completion{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

func completeDirs(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

func completeKnobNames(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, k := range knobs.Visible() {
		if strings.HasPrefix(k.Name, toComplete) {
			out = append(out, cobra.CompletionWithDesc(k.Name, firstSentence(k.Doc)))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeTrialIDs completes --trial from the plan of the study given (or of
// the run --resume names), each ID with the knobs it changes.
func completeTrialIDs(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var plan []store.PlannedTrial
	if len(args) > 0 {
		allow, _ := cmd.Flags().GetBool("allow-outside")
		max, _ := cmd.Flags().GetInt("max-trials")
		if s, err := loadStudy(args[0], allow); err == nil {
			if p, err := study.Expand(s, study.ExpandOptions{MaxTrials: max}); err == nil {
				for _, t := range p.Trials {
					plan = append(plan, store.PlannedTrial{ID: t.ID, Knobs: t.Knobs, Changed: t.Changed})
				}
			}
		}
	} else if dir, _ := cmd.Flags().GetString("resume"); dir != "" {
		if run, err := store.ReadRun(dir); err == nil {
			plan = run.Manifest.Plan
		}
	}
	var out []cobra.Completion
	for _, t := range plan {
		if !strings.HasPrefix(t.ID, toComplete) {
			continue
		}
		desc := "baseline"
		if len(t.Changed) > 0 {
			desc = study.FormatKnobs(t.Knobs, t.Changed)
		}
		out = append(out, cobra.CompletionWithDesc(t.ID, desc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRunDirs completes run directories (folders with a manifest.json)
// and the folders on the way to them (results/, results/<study>/).
func completeRunDirs(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return walkCompletions(toComplete, func(p string, dir bool) (string, bool) {
		switch {
		case dir && isRunDir(p):
			return p, true
		case dir && holdsRunDirs(p, 2):
			return p + "/", true
		}
		return "", false
	})
}

// completeRunsOrBaselines is compare's and export's: run directories or
// baseline files (.json).
func completeRunsOrBaselines(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return walkCompletions(toComplete, func(p string, dir bool) (string, bool) {
		switch {
		case !dir && strings.HasSuffix(p, ".json"):
			return p, true
		case dir && isRunDir(p):
			return p, true
		case dir:
			return p + "/", true // baselines may be anywhere: studies/, results/...
		}
		return "", false
	})
}

// completeStudyResults is history's: the folder of one study's runs
// (results/<study>/), or a folder on the way to one.
func completeStudyResults(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return walkCompletions(toComplete, func(p string, dir bool) (string, bool) {
		switch {
		case dir && holdsRunDirs(p, 1):
			return p, true
		case dir && holdsRunDirs(p, 2):
			return p + "/", true
		}
		return "", false
	})
}

// walkCompletions lists the entries of the folder toComplete is in that
// start with what was typed of the last name, through keep (which returns
// the completion for a path, and whether it is one). A completion that ends
// in / is a folder to go into: the shell adds no space after it.
func walkCompletions(toComplete string, keep func(path string, dir bool) (string, bool)) ([]cobra.Completion, cobra.ShellCompDirective) {
	dir, prefix := filepath.Split(toComplete)
	entries, err := os.ReadDir(cmpOr(dir, "."))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	directive := cobra.ShellCompDirectiveNoFileComp
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || (prefix == "" && strings.HasPrefix(name, ".")) {
			continue
		}
		p := dir + name
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			if st, err := os.Stat(p); err == nil {
				isDir = st.IsDir()
			}
		}
		if c, ok := keep(p, isDir); ok {
			out = append(out, c)
			if strings.HasSuffix(c, "/") {
				directive |= cobra.ShellCompDirectiveNoSpace
			}
		}
	}
	return out, directive
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func isRunDir(p string) bool {
	st, err := os.Stat(filepath.Join(p, "manifest.json"))
	return err == nil && st.Mode().IsRegular()
}

// holdsRunDirs says whether a run directory lies within depth levels under p.
func holdsRunDirs(p string, depth int) bool {
	if depth == 0 {
		return false
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() && (isRunDir(filepath.Join(p, e.Name())) || holdsRunDirs(filepath.Join(p, e.Name()), depth-1)) {
			return true
		}
	}
	return false
}

// firstSentence is a knob's doc up to its first period, for a completion's
// description.
func firstSentence(doc string) string {
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i]
	}
	return strings.TrimSuffix(doc, ".")
}
