package launch

import (
	"errors"
	"fmt"
	"net"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/study"
)

// Kind resolves where a study's trials run: flag (--launcher) when given,
// slurm inside an allocation, the study's launcher.kind, else local. submit
// is --submit (it needs slurm). Wrong choices are usage errors naming where
// the choice came from.
func Kind(flag string, submit bool, s *study.Study, env []string) (string, error) {
	kind, from := flag, "--launcher"
	if kind == "" && InAllocation(env) != "" {
		kind = "slurm"
	}
	if kind == "" {
		kind, from = s.Launcher["kind"], s.Path+": launcher.kind"
	}
	switch kind {
	case "", "local":
		if submit {
			return "", exitcode.Usage(errors.New("--submit submits a Slurm batch job: add --launcher slurm (or launcher.kind: slurm in the study)"))
		}
		if s.Workload.Nodes > 1 {
			return "", exitcode.Usage(fmt.Errorf("%s: workload.nodes is %d, and the local launcher runs on this machine only: "+
				"run it through Slurm (--launcher slurm inside an allocation, or --launcher slurm --submit; docs/clusters.md)", s.Path, s.Workload.Nodes))
		}
		return "local", nil
	case "slurm":
		if !submit && InAllocation(env) == "" {
			return "", exitcode.Usage(fmt.Errorf("%s: the slurm launcher runs trials as job steps inside an allocation, and $SLURM_JOB_ID is not set: "+
				"add --submit to submit the study as a batch job, run it under salloc or sbatch, or use --launcher local", from))
		}
		return "slurm", nil
	}
	return "", exitcode.Usage(fmt.Errorf("%s: unknown launcher %q (want local or slurm)", from, kind))
}

// RendezvousHost is where the rendezvous listens: addr (--rdzv-addr, HOST or
// HOST:PORT); for slurm the address of iface (--rdzv-interface, else the
// study's launcher.rdzv_interface, else the first non-loopback interface;
// loopback when there is none and the trial stays on one node). An empty
// host keeps the runner's default (loopback); port "0" is any free port.
func RendezvousHost(addr, iface, kind string, s *study.Study) (host, port string, err error) {
	port = "0"
	if addr != "" {
		host = addr
		if h, p, err := net.SplitHostPort(addr); err == nil {
			host, port = h, p
		}
		if net.ParseIP(host) == nil {
			if _, err := net.LookupHost(host); err != nil {
				return "", "", exitcode.Usage(fmt.Errorf("--rdzv-addr %s: %v (give HOST or HOST:PORT this machine can listen on)", addr, err))
			}
		}
		return host, port, nil
	}
	name := iface
	if name == "" {
		name = s.Launcher["rdzv_interface"]
	}
	if kind != "slurm" && name == "" {
		return "", port, nil
	}
	ip, err := ReachableIP(name)
	switch {
	case err == nil:
		return ip, port, nil
	case name == "" && s.Workload.Nodes <= 1:
		return "127.0.0.1", port, nil // one node: loopback reaches every rank
	case iface != "":
		return "", "", exitcode.Usage(fmt.Errorf("--rdzv-interface: %w", err))
	}
	return "", "", exitcode.With(exitcode.Environment, err)
}
