package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/ansi"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/internal/version"
)

// commands holds the constructors of every subcommand; each command file adds
// itself in an init function, so this file never changes when one is added.
var commands []func() *cobra.Command

func register(newCommand func() *cobra.Command) { commands = append(commands, newCommand) }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "casestudy",
		Short:         "Reproducible case studies for tuning multi-GPU training (ResNet-50, BERT, GPT)",
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// "did you mean" for commands up to two edits away
		SuggestionsMinimumDistance: 2,
		// every command: tell runMain whether it stops on its own at a signal
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { markGraceful(cmd); neutralizeOutput(cmd) },
	}
	root.PersistentFlags().String("engine-lib", "",
		"path of libcasestudy_engine.so (default: $CASESTUDY_ENGINE_LIB, next to the binary or in ../lib, where make built it)")
	_ = root.MarkPersistentFlagFilename("engine-lib", "so")
	markPath(root.PersistentFlags(), "engine-lib")
	for _, c := range commands {
		root.AddCommand(c())
	}
	groups(root)
	addCompletions(root)
	return root
}

// groups makes each command that only holds subcommands (the root, bench)
// print its help when called alone and refuse an unknown subcommand as a
// usage error (exit status 2), with cobra's suggestions.
func groups(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			hint := fmt.Sprintf("see '%s --help'", cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = fmt.Sprintf("did you mean %q?", s[0])
			}
			return fmt.Errorf("unknown command %q for %q (%s)", args[0], cmd.CommandPath(), hint)
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	for _, sub := range c.Commands() {
		groups(sub)
	}
}

// engineLibFlag is the --engine-lib value ("" when unset) for engine.Discover.
func engineLibFlag(cmd *cobra.Command) string {
	v, _ := cmd.Flags().GetString("engine-lib")
	return v
}

// execute runs the command line and turns its error into an exit status:
// 0 success, 1 a failure or a regression, 2 bad usage or bad input (see
// internal/exitcode).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	stdout, lost := watchStdout(stdout)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitcode.Usage(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	usageArgs(root)
	err := root.ExecuteContext(ctx)
	if lost != nil && lost.first() != nil && exitcode.Of(err) < exitcode.Input { // output lost: the environment (stdouterr.go)
		err = exitcode.With(exitcode.Environment, fmt.Errorf("writing standard output: %w", lost.first()))
	}
	if err == nil {
		return 0
	}
	var silent exitcode.Silent
	if !errors.As(err, &silent) {
		fmt.Fprintf(stderr, "casestudy: %s\n", ansi.Neutralize(err.Error())) // errors quote run data too
	}
	return exitcode.Of(err)
}

// usageArgs makes every command's argument check a usage error (exit status
// 2), as the flag errors are, so commands declare plain cobra validators.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return exitcode.Usage(check(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}
