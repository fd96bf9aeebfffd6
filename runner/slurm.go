package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/store"
)

// SlurmFacts is slurm.json in a run directory made inside an allocation: the
// job, its nodes and where the rendezvous listened.
type SlurmFacts struct {
	JobID      string   `json:"job_id"`
	Nodes      string   `json:"nodes,omitempty"` // SLURM_JOB_NODELIST
	Rendezvous string   `json:"rendezvous"`
	Started    string   `json:"started"`
	Hosts      []string `json:"hosts,omitempty"` // the hosts that reported their provenance (manifest host.nodes)
}

// ReadSlurmFacts reads slurm.json of the run in dir; nil when there is none.
func ReadSlurmFacts(dir string) *SlurmFacts {
	b, err := store.ReadRegular(filepath.Join(dir, "slurm.json"), 1<<20) // not a FIFO (audit N8)
	var f SlurmFacts
	if err != nil || json.Unmarshal(b, &f) != nil || f.JobID == "" {
		return nil
	}
	return &f
}

// UseSlurm makes the run's trials job steps of the allocation this process
// runs in: the launcher in o, slurm.json in the run directory, and the other
// nodes' provenance in man (rewritten through w). host is where the
// rendezvous listens (launch.RendezvousHost). Progress goes to log.
func UseSlurm(o *Options, host string, env []string, srunArgs []string, w *store.Writer, man *store.Manifest, log io.Writer) error {
	l, err := launch.NewSlurm(env, srunArgs)
	if err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	o.Launcher = l
	o.AllocationEnded = func() string { return allocationEnded(l.JobID, env) }
	nodes, _ := launch.LookupEnv(env, "SLURM_JOB_NODELIST")
	facts := SlurmFacts{JobID: l.JobID, Nodes: nodes, Rendezvous: host, Started: time.Now().UTC().Format(time.RFC3339)}
	if facts.Hosts, err = recordNodes(l, env, o.Machine.EngineLib, w, man); err != nil {
		fmt.Fprintf(log, "slurm: the other nodes' provenance is not recorded: %v\n", err)
	}
	b, _ := json.MarshalIndent(facts, "", "  ")
	if err := w.WriteFile("slurm.json", append(b, '\n')); err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	fmt.Fprintf(log, "slurm: job %s (nodes %s); each trial is one srun step; rendezvous on %s\n", l.JobID, facts.Nodes, host)
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
	n, _ := launch.LookupEnv(env, "SLURM_JOB_NUM_NODES")
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

// allocationEnded says why Slurm job id no longer runs (scancel, preemption,
// its time limit): "" while it runs or when Slurm cannot tell.
func allocationEnded(id string, env []string) string {
	state, source, err := launch.JobState(context.Background(), id, env)
	if err != nil || state == "" || state == "RUNNING" {
		return ""
	}
	return fmt.Sprintf("Slurm job %s is %s (%s)", id, state, source)
}
