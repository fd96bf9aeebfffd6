package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

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

// launcherKind resolves --launcher: the flag, slurm inside an allocation, the
// study's launcher.kind, local.
func launcherKind(o *launcherOptions, s *study.Study, env []string) (string, error) {
	kind, from := o.kind, "--launcher"
	if kind == "" && launch.InAllocation(env) != "" {
		kind = "slurm"
	}
	if kind == "" {
		kind, from = s.Launcher["kind"], s.Path+": launcher.kind"
	}
	switch kind {
	case "", "local":
		if o.submit {
			return "", exitcode.Usage(errors.New("--submit submits a Slurm batch job: add --launcher slurm (or launcher.kind: slurm in the study)"))
		}
		if s.Workload.Nodes > 1 {
			return "", exitcode.Usage(fmt.Errorf("%s: workload.nodes is %d, and the local launcher runs on this machine only: "+
				"run it through Slurm (--launcher slurm inside an allocation, or --launcher slurm --submit; docs/clusters.md)", s.Path, s.Workload.Nodes))
		}
		return "local", nil
	case "slurm":
		if !o.submit && launch.InAllocation(env) == "" {
			return "", exitcode.Usage(fmt.Errorf("%s: the slurm launcher runs trials as job steps inside an allocation, and $SLURM_JOB_ID is not set: "+
				"add --submit to submit the study as a batch job, run it under salloc or sbatch, or use --launcher local", from))
		}
		return "slurm", nil
	}
	return "", exitcode.Usage(fmt.Errorf("%s: unknown launcher %q (want local or slurm)", from, kind))
}

// slurmFacts is slurm.json in a run directory made inside an allocation: the
// job, its nodes and where the rendezvous listened.
type slurmFacts struct {
	JobID      string   `json:"job_id"`
	Nodes      string   `json:"nodes,omitempty"` // SLURM_JOB_NODELIST
	Rendezvous string   `json:"rendezvous"`
	Started    string   `json:"started"`
	Hosts      []string `json:"hosts,omitempty"` // the hosts that reported their provenance (manifest host.nodes)
}

// setupLauncher puts the launcher and the rendezvous address into the runner's
// options; for slurm it also records slurm.json in the run directory and the
// other nodes in man (rewritten through w).
func setupLauncher(o *launcherOptions, kind string, s *study.Study, env []string, ropts *runner.Options, w *store.Writer, man *store.Manifest, out io.Writer) error {
	host, port, err := rendezvousHost(o, kind, s)
	if err != nil {
		return err
	}
	if host != "" {
		ropts.RendezvousAddr = net.JoinHostPort(host, port)
		ropts.AdvertiseHost = host
	}
	if kind != "slurm" {
		return nil
	}
	l, err := launch.NewSlurm(env, strings.Fields(s.Launcher["srun_args"]))
	if err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	ropts.Launcher = l
	facts := slurmFacts{JobID: l.JobID, Nodes: getenvList(env, "SLURM_JOB_NODELIST"), Rendezvous: host,
		Started: time.Now().UTC().Format(time.RFC3339)}
	if facts.Hosts, err = recordNodes(l, env, ropts.Machine.EngineLib, w, man); err != nil {
		fmt.Fprintf(out, "slurm: the other nodes' provenance is not recorded: %v\n", err)
	}
	b, _ := json.MarshalIndent(facts, "", "  ")
	if err := w.WriteFile("slurm.json", append(b, '\n')); err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	fmt.Fprintf(out, "slurm: job %s (nodes %s); each trial is one srun step; rendezvous on %s\n", l.JobID, facts.Nodes, host)
	return nil
}

// recordNodes runs `casestudy node-info` once on every node of the allocation
// (one srun step) and records the nodes other than this one in the manifest
// (host.nodes): their GPUs, driver, topology and engine build.
func recordNodes(l *launch.Slurm, env []string, engineLib string, w *store.Writer, man *store.Manifest) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	n := getenvList(env, "SLURM_JOB_NUM_NODES")
	if n == "" {
		n = "1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.Srun, "--job-name=casestudy-node-info", "--nodes="+n, "--ntasks="+n,
		"--ntasks-per-node=1", "--kill-on-bad-exit=1", "--mpi=none", "--time=2", "--label",
		exe, "node-info", "--engine-lib", engineLib)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("srun casestudy node-info: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	self, _ := os.Hostname()
	var hosts []string
	var others []store.Host
	for _, line := range strings.Split(string(stdout), "\n") {
		i := strings.Index(line, "{") // "0: {...}"
		if i < 0 {
			continue
		}
		var h store.Host
		if err := json.Unmarshal([]byte(line[i:]), &h); err != nil {
			return nil, fmt.Errorf("node-info printed %q: %w", line, err)
		}
		hosts = append(hosts, h.Hostname)
		if h.Hostname != self {
			others = append(others, h)
		}
	}
	sort.Strings(hosts)
	if len(others) == 0 {
		return hosts, nil
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Hostname < others[j].Hostname })
	man.Host.Nodes = others // a resumed run may land on other nodes: the latest set
	return hosts, w.WriteManifest(man)
}

// rendezvousHost is where the rendezvous listens: --rdzv-addr; for slurm the
// interface's address (--rdzv-interface, launcher.rdzv_interface, else the
// first non-loopback one; loopback when there is none and the trial stays on
// one node). "" keeps the runner's default (loopback).
func rendezvousHost(o *launcherOptions, kind string, s *study.Study) (host, port string, err error) {
	port = "0"
	if o.rdzvAddr != "" {
		host = o.rdzvAddr
		if h, p, err := net.SplitHostPort(o.rdzvAddr); err == nil {
			host, port = h, p
		}
		if net.ParseIP(host) == nil {
			if _, err := net.LookupHost(host); err != nil {
				return "", "", exitcode.Usage(fmt.Errorf("--rdzv-addr %s: %v (give HOST or HOST:PORT this machine can listen on)", o.rdzvAddr, err))
			}
		}
		return host, port, nil
	}
	iface := o.rdzvIface
	if iface == "" {
		iface = s.Launcher["rdzv_interface"]
	}
	if kind != "slurm" && iface == "" {
		return "", port, nil
	}
	ip, err := launch.ReachableIP(iface)
	switch {
	case err == nil:
		return ip, port, nil
	case iface == "" && s.Workload.Nodes <= 1:
		return "127.0.0.1", port, nil // one node: loopback reaches every rank
	case o.rdzvIface != "":
		return "", "", exitcode.Usage(fmt.Errorf("--rdzv-interface: %w", err))
	}
	return "", "", exitcode.With(exitcode.Environment, err)
}

func getenvList(env []string, key string) string {
	v, _ := launch.LookupEnv(env, key)
	return v
}

// unsetInt is a flag for a count that may be left unset (-1): its help shows no
// default, and it takes whole numbers from 0 up.
type unsetInt struct{ v *int }

func (u unsetInt) String() string {
	if u.v == nil || *u.v < 0 {
		return ""
	}
	return strconv.Itoa(*u.v)
}

func (u unsetInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a whole number, 0 or more")
	}
	*u.v = n
	return nil
}

func (u unsetInt) Type() string { return "int" }
