package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// launcherOptions are run's flags for where trials run: the launcher, the
// rendezvous address other nodes reach, and --submit's batch job.
type launcherOptions struct {
	kind        string
	submit      bool
	rdzvAddr    string
	rdzvIface   string
	partition   string
	account     string
	timeLimit   string
	gpusPerNode int
	runID       string // hidden: the batch job creates the run directory --submit named
}

func addLauncherFlags(f *pflag.FlagSet, o *launcherOptions) {
	f.StringVar(&o.kind, "launcher", "", "where trials run: local, or slurm (one job step per trial; default: slurm inside an allocation ($SLURM_JOB_ID), else the study's launcher.kind, else local)")
	f.BoolVar(&o.submit, "submit", false, "with --launcher slurm outside an allocation: write a batch script that runs the study and submit it with sbatch")
	f.StringVar(&o.rdzvAddr, "rdzv-addr", "", "`HOST[:PORT]` the rendezvous listens on and ranks dial (default: 127.0.0.1 for local; for slurm the address of --rdzv-interface or the first non-loopback interface)")
	f.StringVar(&o.rdzvIface, "rdzv-interface", "", "network `INTERFACE` whose address the rendezvous uses with slurm (also launcher.rdzv_interface)")
	f.StringVar(&o.partition, "partition", "", "--submit: Slurm partition (also launcher.partition)")
	f.StringVar(&o.account, "account", "", "--submit: Slurm account (also launcher.account)")
	f.StringVar(&o.timeLimit, "time", "", "--submit: the job's time limit, e.g. 2:00:00 or 90m (also launcher.time_limit; default: every launch at its timeout, plus 10 minutes)")
	o.gpusPerNode = -1 // unset
	f.Var(unsetInt{&o.gpusPerNode}, "gpus-per-node", "--submit: GPUs per node to request (default: workload.gpus, 0 on device cpu)")
	f.StringVar(&o.runID, "run-id", "", "name of the run directory to create (set by --submit's batch script)")
	_ = f.MarkHidden("run-id")
}

// rendezvous is where a run's rendezvous listens, resolved from the flags
// before anything is written (resolveRendezvous).
type rendezvous struct {
	host, port string // host "": the runner's default (loopback)
}

// resolveRendezvous checks --rdzv-addr and --rdzv-interface and resolves the
// rendezvous address, before the run directory exists: bad input ends the
// command with exit status 2 and nothing written. The port must be 0 (any
// free port) to 65535; a host given must be one this machine can listen on.
func resolveRendezvous(o *launcherOptions, kind string, s *study.Study) (rendezvous, error) {
	if err := checkRdzvPort(o.rdzvAddr); err != nil {
		return rendezvous{}, err
	}
	host, port, err := launch.RendezvousHost(o.rdzvAddr, o.rdzvIface, kind, s)
	if err != nil {
		return rendezvous{}, err
	}
	if host != "" && o.rdzvAddr != "" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return rendezvous{}, exitcode.Usage(fmt.Errorf("--rdzv-addr %s: this machine cannot listen on %s (%v): give HOST or HOST:PORT of this machine, like 127.0.0.1:29500", o.rdzvAddr, host, err))
		}
		l.Close()
	}
	return rendezvous{host: host, port: port}, nil
}

// checkRdzvPort refuses a --rdzv-addr whose port is not a number from 0 (any
// free port) to 65535.
func checkRdzvPort(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Count(addr, ":") == 1 { // HOST:PORT that does not parse
			return exitcode.Usage(fmt.Errorf("--rdzv-addr %s: %v: give HOST or HOST:PORT, like 127.0.0.1:29500", addr, err))
		}
		return nil // HOST alone (an IPv6 address too)
	}
	if host == "" {
		return exitcode.Usage(fmt.Errorf("--rdzv-addr %s: no host: give HOST or HOST:PORT, like 127.0.0.1:29500", addr))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return exitcode.Usage(fmt.Errorf("--rdzv-addr %s: port %q is not a port number: give 1 to 65535 (or leave the port out: any free port)", addr, port))
	}
	return nil
}

// setupLauncher puts the rendezvous address (resolveRendezvous) and, inside
// a Slurm allocation, the slurm launcher into the runner's options
// (runner.UseSlurm).
func setupLauncher(rv rendezvous, kind string, s *study.Study, env []string, ropts *runner.Options, w *store.Writer, man *store.Manifest, out io.Writer) error {
	if rv.host != "" {
		ropts.RendezvousAddr = net.JoinHostPort(rv.host, rv.port)
		ropts.AdvertiseHost = rv.host
	}
	if kind != "slurm" {
		return nil
	}
	return runner.UseSlurm(ropts, rv.host, env, strings.Fields(s.Launcher["srun_args"]), w, man, out)
}

// submitOwnFlags are run's flags that --submit does not pass to the job's own
// `casestudy run` (it sets them itself, or they are the submission's).
var submitOwnFlags = []string{"submit", "launcher", "out", "run-id", "partition", "account", "time", "gpus-per-node", "json"}

// runSubmit submits the study as a Slurm batch job (launch.SubmitStudy) and
// says where its results and output will be.
func runSubmit(ctx context.Context, cmd *cobra.Command, o *runOptions, s *study.Study, plan *study.Plan) error {
	exe, err := os.Executable()
	if err != nil {
		return exitcode.With(exitcode.Environment, fmt.Errorf("locating the casestudy binary for the job: %w", err))
	}
	sub, b, err := launch.SubmitStudy(ctx, s, plan, launch.SubmitOptions{Exe: exe, Out: o.out,
		RunArgs: setFlags(cmd, submitOwnFlags...), Env: os.Environ(), Partition: o.launcher.partition,
		Account: o.launcher.account, TimeLimit: o.launcher.timeLimit, GPUsPerNode: o.launcher.gpusPerNode})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.json {
		if err := writeJSON(out, sub); err != nil {
			return err
		}
		out = cmd.ErrOrStderr()
	}
	fmt.Fprintf(out, "submitted Slurm job %s: %s (%d trials planned) on %d node(s), %d tasks per node, time limit %d min\n",
		sub.JobID, s.Name, len(plan.Trials), b.Nodes, b.TasksPerNode, b.TimeMinutes)
	fmt.Fprintf(out, "results: %s\n  script: %s\n  output: %s\nfollow with: %s\n",
		sub.RunDir, sub.Script, strings.ReplaceAll(sub.Output, "%j", sub.JobID), commandLine("status", sub.RunDir))
	return nil
}
