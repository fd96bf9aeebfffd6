package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/casestudy/casestudy/launch/setting"
)

// Slurm starts each trial's ranks as one job step of the allocation the runner
// is in ($SLURM_JOB_ID): one srun with the trial's node and task counts,
// --kill-on-bad-exit=1, a --time from the trial's timeout, the trial's
// environment exported (each rank learns its rank from SLURM_PROCID), every
// GPU of the step's node visible to each of its tasks (each rank picks its
// device from SLURM_LOCALID), and the node's CPUs split evenly between its
// tasks, bound to cores. Slurm's verdicts (time limit, out of memory, node
// failure) come back in each Exit's Outcome and Reason.
type Slurm struct {
	Srun    string   // "": srun from PATH
	Scancel string   // "": scancel from PATH
	JobID   string   // the allocation, for messages and scancel
	Args    []string // extra srun arguments (the study's launcher.srun_args)
	// CPUsPerNode is the fewest CPUs the allocation holds on any of its
	// nodes (SLURM_JOB_CPUS_PER_NODE); 0: unknown, srun's default applies.
	CPUsPerNode int
}

// EnvJobID is set by Slurm inside an allocation.
const EnvJobID = "SLURM_JOB_ID"

// InAllocation returns the Slurm job the environment is inside, "" outside.
func InAllocation(env []string) string {
	v, _ := LookupEnv(env, EnvJobID)
	return v
}

// NewSlurm is the launcher for the allocation env is inside; it fails outside
// one or without srun.
func NewSlurm(env []string, srunArgs []string) (*Slurm, error) {
	job := InAllocation(env)
	if job == "" {
		return nil, errors.New("the slurm launcher runs inside an allocation ($SLURM_JOB_ID is not set): " +
			"use --submit to submit the study as a batch job, or run it under salloc/sbatch")
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		return nil, fmt.Errorf("inside Slurm job %s but srun is not on PATH: %w", job, err)
	}
	scancel, _ := exec.LookPath("scancel")
	return &Slurm{Srun: srun, Scancel: scancel, JobID: job, Args: srunArgs, CPUsPerNode: AllocatedCPUsPerNode(env)}, nil
}

// Deadline is the runner's backstop for a trial limited to timeout: srun gets
// --time rounded up to whole minutes, Slurm checks limits about every 30 s
// and then waits KillWait (30 s by default) before SIGKILL.
func (s *Slurm) Deadline(timeout time.Duration) time.Duration {
	return time.Duration(setting.Minutes(timeout))*time.Minute + 2*time.Minute
}

// StepArgs are srun's arguments for spec (without the program) and the
// environment srun runs with; the ranks' per-rank variables (CASESTUDY_RANK,
// CUDA_VISIBLE_DEVICES) are Slurm's to set (SLURM_PROCID, SLURM_LOCALID and
// the step's GPUs).
//
// GPUs are requested per node and never bound per task: on clusters that confine devices with cgroups a task bound to one GPU
// cannot see its NVLink peers, and NCCL silently falls back to shared memory
// or PCIe (NVIDIA/nccl#1066). Each rank picks its device from its local rank
// instead (runner: rendezvous.Welcome.DevicePerLocalRank). CPUs: each task
// gets its share of the node's CPUs (CPUsPerTask), bound to cores, unless the
// study's srun_args say otherwise.
func (s *Slurm) StepArgs(spec Spec) ([]string, []string, error) {
	n := len(spec.Ranks)
	if n == 0 {
		return nil, nil, fmt.Errorf("trial %s has no ranks", spec.Trial)
	}
	nodes := max(spec.Nodes, 1)
	if n%nodes != 0 {
		return nil, nil, fmt.Errorf("trial %s: %d ranks do not spread evenly over %d nodes", spec.Trial, n, nodes)
	}
	perNode := n / nodes
	gpus := false
	for _, r := range spec.Ranks {
		gpus = gpus || r.GPU != ""
	}
	drop := map[string]bool{"CASESTUDY_RANK": true}
	if gpus {
		drop["CUDA_VISIBLE_DEVICES"] = true // this node's numbering means nothing on the others
		for _, k := range perTaskGPUVars {
			drop[k] = true
		}
	}
	env, err := commonEnv(spec.Ranks, drop)
	if err != nil {
		return nil, nil, fmt.Errorf("trial %s: %w", spec.Trial, err)
	}
	args := []string{
		"--job-name=casestudy-" + spec.Trial,
		"--nodes=" + strconv.Itoa(nodes),
		"--ntasks=" + strconv.Itoa(n),
		"--ntasks-per-node=" + strconv.Itoa(perNode),
		"--kill-on-bad-exit=1",
		"--export=ALL",
		"--mpi=none",
		"--label",   // task output prefixed by its rank: split into rank logs
		"--verbose", // the step id, each task's node and each task's end
	}
	if spec.Timeout > 0 {
		args = append(args, "--time="+strconv.Itoa(setting.Minutes(spec.Timeout)))
	}
	if gpus {
		// no --gpu-bind: "none" leaves CUDA_VISIBLE_DEVICES unset (Slurm
		// 22.05), and then a node whose devices are not confined shows
		// every GPU, the other jobs' too
		ppg := max(spec.ProcsPerGPU, 1)
		args = append(args, "--gpus-per-node="+strconv.Itoa((perNode+ppg-1)/ppg))
	}
	if s.CPUsPerNode > 0 && !hasArg(s.Args, "--cpus-per-task", "-c", "--cpus-per-gpu") {
		// --cpus-per-task implies --exact (Slurm 22.05): the step then waits
		// for CPUs a step that just ended (node-info, the previous trial) has
		// not yet handed back; trials run one step at a time, so --overlap
		// lets it start at once
		args = append(args, "--cpus-per-task="+strconv.Itoa(CPUsPerTask(s.CPUsPerNode, perNode)), "--overlap")
		if !hasArg(s.Args, "--cpu-bind", "--cpu_bind") {
			args = append(args, "--cpu-bind=cores")
		}
	}
	args = append(args, s.Args...)
	return args, env, nil
}

// CPUsPerTask is each task's share of a node with cpus CPUs and tasks tasks:
// the CPUs less one, kept for the runner (its rendezvous, heartbeats and GPU
// sampler run on the first node, beside the ranks), divided evenly; at least 1.
func CPUsPerTask(cpus, tasks int) int {
	return max(1, (cpus-1)/max(tasks, 1))
}

// perTaskGPUVars are the allocation's GPU settings srun would read from its
// environment and apply per task (salloc/sbatch --gpus-per-task, --gpu-bind
// export them); a step that inherited them would confine each task to one GPU.
var perTaskGPUVars = []string{"SLURM_GPUS_PER_TASK", "SLURM_GPU_BIND", "SLURM_TRES_PER_TASK"}

// hasArg says whether args hold one of the options (--opt, --opt=v, -c N, -cN).
func hasArg(args []string, opts ...string) bool {
	for _, a := range args {
		for _, o := range opts {
			if a == o || strings.HasPrefix(a, o+"=") || (len(o) == 2 && strings.HasPrefix(a, o)) {
				return true
			}
		}
	}
	return false
}

// AllocatedCPUsPerNode is the fewest CPUs the allocation in env holds on one
// node: SLURM_JOB_CPUS_PER_NODE ("72(x2)", "72,36(x3)"), else
// SLURM_CPUS_ON_NODE; 0 when neither says.
func AllocatedCPUsPerNode(env []string) int {
	least := 0
	if v, ok := LookupEnv(env, "SLURM_JOB_CPUS_PER_NODE"); ok {
		for _, part := range strings.Split(v, ",") {
			n, _, _ := strings.Cut(strings.TrimSpace(part), "(")
			c, err := strconv.Atoi(n)
			if err != nil || c < 1 {
				return 0
			}
			if least == 0 || c < least {
				least = c
			}
		}
		return least
	}
	if v, ok := LookupEnv(env, "SLURM_CPUS_ON_NODE"); ok {
		if c, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && c > 0 {
			return c
		}
	}
	return 0
}

// commonEnv is the environment every rank shares, minus drop; a variable that
// differs between ranks and is not dropped cannot travel through one srun.
func commonEnv(ranks []Rank, drop map[string]bool) ([]string, error) {
	first := map[string]string{}
	var out []string
	for _, kv := range ranks[0].Env {
		k, v, _ := strings.Cut(kv, "=")
		if drop[k] {
			continue
		}
		first[k] = v
		out = append(out, kv)
	}
	for _, r := range ranks[1:] {
		seen := 0
		for _, kv := range r.Env {
			k, v, _ := strings.Cut(kv, "=")
			if drop[k] {
				continue
			}
			if w, ok := first[k]; !ok || w != v {
				return nil, fmt.Errorf("rank %d's environment differs from rank 0's in %s; srun starts every rank with one environment", r.Rank, k)
			}
			seen++
		}
		if seen != len(first) {
			return nil, fmt.Errorf("rank %d's environment lacks variables rank 0 has; srun starts every rank with one environment", r.Rank)
		}
	}
	return out, nil
}

type slurmGroup struct {
	s     *Slurm
	spec  Spec
	cmd   *exec.Cmd
	exits chan Exit
	done  chan struct{} // srun has exited
	kill  sync.Once

	mu     sync.Mutex // everything below
	logs   []io.Writer
	report *stepReport
	errs   []string     // srun's error lines
	sent   map[int]bool // ranks whose Exit went out
	closed bool         // exits is closed
}

// exitHold is how long an Exit waits after srun reported the task's end, so
// that slurmstepd's verdict (it travels on another stream) can join it.
const exitHold = 300 * time.Millisecond

// Start runs srun for the trial; its output is split into the rank logs.
func (s *Slurm) Start(_ context.Context, spec Spec) (Group, error) {
	args, env, err := s.StepArgs(spec)
	if err != nil {
		return nil, err
	}
	srun := s.Srun
	if srun == "" {
		srun = "srun"
	}
	cmd := exec.Command(srun, append(append(args, spec.Path), spec.Args...)...)
	cmd.Env, cmd.Dir = env, spec.Dir
	// srun's own process group (a terminal's Ctrl-C is the runner's); SIGTERM
	// when the runner dies, which makes srun end the step.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	g := &slurmGroup{s: s, spec: spec, cmd: cmd, exits: make(chan Exit, len(spec.Ranks)),
		done: make(chan struct{}), report: newStepReport(), sent: map[int]bool{}}
	for _, r := range spec.Ranks {
		w := r.Log
		if w == nil {
			w = io.Discard
		}
		g.logs = append(g.logs, w)
	}
	if err := startOnSpawner(cmd); err != nil {
		return nil, fmt.Errorf("starting srun for %s: %w", spec.Trial, err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); g.read(stdout) }()
	go func() { defer readers.Done(); g.read(stderr) }()
	go func() {
		readers.Wait() // all output read before Wait closes the pipes
		err := cmd.Wait()
		close(g.done)
		g.flush(err)
	}()
	return g, nil
}

// read splits srun's output: a task's labelled line goes to its rank's log,
// srun's own lines are read for the step's facts and, unless chatter, go to
// every rank's log.
func (g *slurmGroup) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			g.line(strings.TrimRight(line, "\r\n"))
		}
		if err != nil {
			return
		}
	}
}

func (g *slurmGroup) line(line string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, rest, ok := labelled(line); ok && t < len(g.logs) {
		g.report.taskLine(rest)
		fmt.Fprintln(g.logs[t], rest)
		return
	}
	before := len(g.report.ends)
	g.report.srunLine(line)
	if len(g.report.ends) != before { // tasks ended: their Exits go out soon, before srun's own end
		for rank := range g.report.ends {
			if !g.sent[rank] {
				time.AfterFunc(exitHold, func() { g.emit(rank) })
			}
		}
	}
	if strings.HasPrefix(line, "srun: error:") {
		g.errs = append(g.errs, strings.TrimPrefix(line, "srun: error: "))
	}
	if !srunNoise(line) {
		for _, w := range g.logs {
			fmt.Fprintln(w, line)
		}
	}
}

// emit sends rank's Exit as srun reported it, once.
func (g *slurmGroup) emit(rank int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	end, ok := g.report.ends[rank]
	if g.closed || g.sent[rank] || !ok || rank >= len(g.spec.Ranks) {
		return
	}
	g.sent[rank] = true
	g.exits <- Exit{Rank: rank, At: time.Now(), Code: end.code, Signal: end.signal, Node: g.report.nodes[rank],
		Outcome: g.report.outcome, Reason: g.report.reason}
}

// flush sends the Exits not sent yet once srun has ended: ranks that failed
// on their own first (the runner takes the first failure as the cause), then
// those that were killed, then the rest; then closes the channel.
func (g *slurmGroup) flush(waitErr error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rep := g.report
	srunCode := g.cmd.ProcessState.ExitCode()
	now := time.Now()
	var out []Exit
	for _, r := range g.spec.Ranks {
		if g.sent[r.Rank] {
			continue
		}
		e := Exit{Rank: r.Rank, At: now, Node: rep.nodes[r.Rank], Outcome: rep.outcome, Reason: rep.reason}
		if end, ok := rep.ends[r.Rank]; ok {
			e.Code, e.Signal = end.code, end.signal
		} else if srunCode != 0 {
			e.Code = srunCode
			last := ""
			if len(g.errs) > 0 {
				last = ": " + g.errs[len(g.errs)-1]
			}
			if rep.stepID == "" { // no rank ever ran: the step itself failed
				if e.Outcome == "" {
					e.Outcome, e.Reason = "failed", fmt.Sprintf("srun could not start a step in job %s (exit status %d)%s", g.s.JobID, srunCode, last)
				}
			} else if e.Outcome == "" && strings.Contains(last, "Application launch failed") {
				// The step was created but its tasks never launched (e.g. "Job credential
				// revoked" when the allocation is cancelled in between): the step failed to
				// start, as above, so the runner asks whether the allocation is ending.
				e.Outcome, e.Reason = "failed", fmt.Sprintf("srun could not launch the tasks of step %s in job %s (exit status %d)%s", rep.stepID, g.s.JobID, srunCode, last)
			} else {
				e.Err = fmt.Errorf("srun (job %s, step %s) reported no end for task %d and exited with %d%s", g.s.JobID, rep.stepID, r.Rank, srunCode, last)
			}
		}
		var exitErr *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &exitErr) && e.Err == nil {
			e.Err = waitErr
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return exitOrder(out[i]) < exitOrder(out[j]) })
	for _, e := range out {
		g.sent[e.Rank] = true
		g.exits <- e
	}
	g.closed = true
	close(g.exits)
}

// exitOrder ranks the Exits flush sends: a rank that failed on its own (a
// non-zero code) first, then one that was ended (a signal, or the code a
// shell exits with when its child dies of SIGTERM or SIGKILL, 128+15 and
// 128+9, as a task whose command is a shell reports --kill-on-bad-exit's
// SIGTERM), then the rest.
func exitOrder(e Exit) int {
	switch {
	case e.Code > 0 && e.Signal == "" && e.Code != 128+15 && e.Code != 128+9:
		return 0
	case e.Signal != "" || e.Code != 0:
		return 1
	}
	return 2
}

func (g *slurmGroup) Exits() <-chan Exit { return g.exits }

// Kill ends the step: SIGTERM to its tasks through scancel (when srun has
// named the step), then after grace srun's own SIGTERM (srun kills the step),
// then SIGKILL to srun and a full scancel of the step.
func (g *slurmGroup) Kill(grace time.Duration) {
	g.kill.Do(func() {
		go func() {
			g.mu.Lock()
			step := g.report.stepID
			g.mu.Unlock()
			if step != "" && g.s.Scancel != "" {
				g.scancel("--signal=TERM", step)
			} else {
				_ = g.cmd.Process.Signal(syscall.SIGTERM)
			}
			for _, next := range []func(){
				func() { _ = g.cmd.Process.Signal(syscall.SIGTERM) },
				func() {
					_ = g.cmd.Process.Signal(syscall.SIGKILL)
					if step != "" && g.s.Scancel != "" {
						g.scancel("--signal=KILL", step)
					}
				},
			} {
				select {
				case <-g.done:
					return
				case <-time.After(grace):
					next()
				}
			}
		}()
	})
}

func (g *slurmGroup) scancel(args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, g.s.Scancel, args...).Run()
}
