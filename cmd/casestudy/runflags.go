package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// predictModelFlags are run's flags that only `run --predict N` reads (the
// prediction's cost model): without --predict they would change nothing.
var predictModelFlags = []string{"topology", "fit", "fit-interpolate", "fit-beside", "fit-stretch",
	"nccl-algo", "nccl-proto", "kappa", "cores", "collective-draws"}

// submitFlags are run's flags that only --submit reads (the batch job's
// request); the job's own run gets none of them (submitOwnFlags).
var submitFlags = []string{"partition", "account", "time", "gpus-per-node"}

// The NCCL model's algorithms and protocols (predict/nccl.go), as NCCL_ALGO
// and NCCL_PROTO name them; case does not matter.
var (
	ncclAlgos  = []string{"Ring", "Tree"}
	ncclProtos = []string{"LL", "LL128", "Simple"}
)

// checkRunFlags refuses, before anything is read or written, flags run would
// accept and then ignore or misread: flags of --predict without it, of
// --submit without it, --out with --resume, --cores below 1, an NCCL
// algorithm or protocol the model does not have.
func checkRunFlags(cmd *cobra.Command, o *runOptions) error {
	changed := func(names []string) []string {
		var out []string
		for _, n := range names {
			if cmd.Flags().Changed(n) {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	p := &o.predict
	if o.resume != "" && cmd.Flags().Changed("out") {
		return exitcode.Usage(fmt.Errorf("--out %s with --resume: a resumed run writes into RUN_DIR itself; leave --out out", o.out))
	}
	if cmd.Flags().Changed("predict") && p.gpus == 0 {
		return exitcode.Usage(errors.New("--predict 0: give the GPUs to predict for, 2 or more (or leave --predict out)"))
	}
	if p.gpus == 0 {
		if given := changed(predictModelFlags); len(given) > 0 {
			return exitcode.Usage(fmt.Errorf("%s %s with --predict N (the prediction's cost model); "+
				"without --predict the run predicts nothing and would ignore %s: add --predict N or leave %s out",
				strings.Join(given, ", "), oneOrMore(len(given), "goes", "go"), oneOrMore(len(given), "it", "them"), oneOrMore(len(given), "it", "them")))
		}
	}
	if err := checkModelFlags(cmd, p); err != nil {
		return err
	}
	if !o.launcher.submit {
		if given := changed(submitFlags); len(given) > 0 {
			return exitcode.Usage(fmt.Errorf("%s %s with --launcher slurm --submit (the batch job's request to Slurm); "+
				"this run submits no job and would ignore %s: add --submit or leave %s out",
				strings.Join(given, ", "), oneOrMore(len(given), "goes", "go"), oneOrMore(len(given), "it", "them"), oneOrMore(len(given), "it", "them")))
		}
	}
	return checkRdzvPort(o.launcher.rdzvAddr)
}

// checkModelFlags refuses cost-model flags of run --predict and predict
// that the model would misread: --cores below 1, an NCCL algorithm or
// protocol it does not have, --nccl-algo/--nccl-proto without --topology
// (the --fit line has none).
func checkModelFlags(cmd *cobra.Command, p *predictFlags) error {
	if cmd.Flags().Changed("cores") && p.cores < 1 {
		return exitcode.Usage(fmt.Errorf("--cores %d: give the cores the CPU ranks share, 1 or more (or leave --cores out: this machine's)", p.cores))
	}
	for _, f := range []struct {
		name, value string
		known       []string
	}{{"nccl-algo", p.algo, ncclAlgos}, {"nccl-proto", p.proto, ncclProtos}} {
		if !cmd.Flags().Changed(f.name) {
			continue
		}
		if !slices.ContainsFunc(f.known, func(k string) bool { return strings.EqualFold(k, f.value) }) {
			return exitcode.Usage(fmt.Errorf("--%s %q: give one of %s (or leave --%s out: the model's own pick)",
				f.name, f.value, strings.Join(f.known, ", "), f.name))
		}
		if p.topology == "" {
			return exitcode.Usage(fmt.Errorf("--%s restricts the NCCL model of --topology; --fit's alpha-beta fit has no algorithms "+
				"or protocols: give --topology NAME, or leave --%s out", f.name, f.name))
		}
	}
	return nil
}

func oneOrMore(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// checkOutFolder refuses an --out (or the study's folder under it, dir) that
// is a file, or lies under one: run directories need folders there, and
// store.Create would fail only after the run was planned, with exit status 3.
// Other errors (permissions) are left to store.Create.
func checkOutFolder(out, dir string) error {
	for p := dir; ; {
		st, err := os.Stat(p)
		switch {
		case err == nil && st.IsDir():
			return nil
		case err == nil:
			what := fmt.Sprintf("%s is a file", p)
			if p != filepath.Clean(out) {
				what = fmt.Sprintf("%s, on its path, is a file", p)
			}
			return exitcode.Usage(fmt.Errorf("--out %s: %s, not a folder: give --out a folder for run directories (it is created when missing)", out, what))
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}
