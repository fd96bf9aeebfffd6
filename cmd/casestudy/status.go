package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

func init() { register(newStatusCommand) }

// runStatus is how far a run got (`casestudy status --json`).
type runStatus struct {
	RunDir   string         `json:"run_dir"`
	Study    string         `json:"study,omitempty"`
	Started  bool           `json:"started"`             // the run directory exists
	Planned  int            `json:"planned"`             // trials of the plan (greedy: round 1, grows)
	Done     int            `json:"done"`                // trials with a committed record
	Skipped  int            `json:"skipped"`             // combinations the planner dropped, recorded
	Outcomes map[string]int `json:"outcomes"`            // committed records by outcome
	InFlight string         `json:"in_flight,omitempty"` // running: the trial with logs but no record yet
	// State: running (a live process holds the run's writer lock), stopped
	// (nobody holds it and trials are missing: killed or crashed),
	// interrupted (stopped by a signal, records of interrupted trials),
	// finished; "" when status cannot tell (a Slurm job Slurm says runs, or
	// a lock it cannot try).
	State      string     `json:"state,omitempty"`
	Writer     string     `json:"writer,omitempty"`     // running: the lock's holder, as it wrote itself
	Unfinished string     `json:"unfinished,omitempty"` // not running: the trial that started and has no record
	Last       *lastTrial `json:"last,omitempty"`
	Resume     string     `json:"resume,omitempty"` // the command that finishes an interrupted or stopped run
	// Progress counts launches (one log per launch): started of planned,
	// elapsed time and the ETA at the pace of the finished ones.
	Progress *timeline.Progress `json:"progress,omitempty"`

	JobID     string `json:"job_id,omitempty"`
	JobState  string `json:"job_state,omitempty"`  // PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...
	StateFrom string `json:"state_from,omitempty"` // squeue | scontrol | sacct
	StateErr  string `json:"state_error,omitempty"`
	JobOutput string `json:"job_output,omitempty"` // the job's own output file

	studyPath string // the manifest's, for the resume command
}

type lastTrial struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

func newStatusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status RUN_DIR",
		Short: "Tell how far a run got: trials done of planned, outcomes, launches, elapsed time and ETA, its Slurm job's state",
		Long: `status reads a run directory (trials.jsonl, manifest.json) and says how many
trials have finished of those planned, with their outcomes, and how many
launches have started (one log each) and the time elapsed. While a process
holds the run's writer lock it shows the trial in flight and the time left
at the pace of the finished launches; once none does, whether the run
finished, was interrupted or stopped (killed or crashed), with the command
that finishes it. For a run submitted with 'casestudy run --submit' it also asks Slurm
for the job's state (squeue, scontrol, sacct, whichever knows), also before
the job has started and created the run directory.`,
		Example: `  casestudy status results/gpt-smoke/20260102T030405Z-ab12cd
  casestudy status --json results/gpt/20260102T030405Z-ab12cd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := readStatus(cmd.Context(), args[0], os.Environ())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// readStatus gathers the status of the run in dir (or of its submission
// folder dir.slurm).
func readStatus(ctx context.Context, dir string, env []string) (*runStatus, error) {
	dir = strings.TrimSuffix(filepath.Clean(dir), ".slurm")
	st := &runStatus{RunDir: dir, Outcomes: map[string]int{}}
	held, holder := store.WriterUnknown, ""
	sub, err := launch.ReadSubmission(dir)
	if err != nil {
		return nil, exitcode.Usage(err)
	}
	if sub != nil {
		st.JobID, st.JobOutput = sub.JobID, sub.Output
	}
	if facts := runner.ReadSlurmFacts(dir); facts != nil {
		st.JobID = facts.JobID
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		run, err := store.ReadRun(dir)
		if err != nil {
			return nil, exitcode.Usage(err) // as report, check and baseline
		}
		st.Started = true
		fillRunStatus(st, run)
		p := timeline.RunProgress(run, time.Now())
		st.Progress = &p
		held, holder = store.ProbeWriter(dir)
	} else if st.JobID == "" {
		return nil, exitcode.Usage(fmt.Errorf("%s is not a run directory (no manifest.json) nor a submitted one (no %s): give a folder under results/<study>/",
			dir, launch.SubmissionFile(dir)))
	}
	if st.JobID != "" {
		st.JobOutput = strings.ReplaceAll(st.JobOutput, "%j", st.JobID)
		state, from, err := launch.JobState(ctx, st.JobID, env)
		st.JobState, st.StateFrom = state, from
		if err != nil {
			st.StateErr = err.Error()
		}
	}
	if st.Started {
		settleState(st, held, holder)
	}
	return st, nil
}

// settleState decides whether the run is running from its writer lock (and
// for a Slurm job, Slurm's word): only a running run has a trial in flight
// and an ETA; one that is not running and is not done says so and gives the
// command that finishes it.
func settleState(st *runStatus, held store.WriterState, holder string) {
	if held == store.WriterLive {
		st.State, st.Writer = "running", holder
		return
	}
	// A Slurm job's writer may run on another node, whose lock this one may
	// not see (NFS): only the job's end says it stopped.
	if held == store.WriterUnknown || st.JobID != "" && (st.JobState == "" || !jobOver(st.JobState)) {
		return // cannot tell: as before, from the logs
	}
	st.Unfinished, st.InFlight = st.InFlight, ""
	interrupted := st.Outcomes[string(store.Interrupted)]
	switch {
	case interrupted > 0:
		st.State = "interrupted"
	case st.Done < st.Planned || st.Unfinished != "":
		st.State = "stopped"
		st.Resume = resumeCommand(st.studyPath, st.RunDir)
	default:
		st.State = "finished"
		st.Unfinished = ""
	}
	if st.Progress != nil {
		st.Progress.ETA, st.Progress.AtMost = 0, false
	}
}

// resumeCommand is the command that finishes the run in dir; without a
// study path (a manifest that has none) --resume reads the study the
// manifest recorded.
func resumeCommand(studyPath, dir string) string {
	if studyPath == "" {
		return commandLine("run", "--resume", absPath(dir))
	}
	return commandLine("run", absPath(studyPath), "--resume", absPath(dir))
}

func fillRunStatus(st *runStatus, run *store.Run) {
	m := run.Manifest
	st.Study, st.Planned = m.Study, len(m.Plan)
	recorded := map[string]bool{}
	for _, t := range run.Trials {
		recorded[t.ID] = true
		st.Outcomes[string(t.Outcome)]++
		if t.Outcome == store.Skipped {
			st.Skipped++
			continue
		}
		st.Last = &lastTrial{ID: t.ID, Outcome: string(t.Outcome), Error: t.Error}
		if t.Outcome == store.Interrupted { // not done: --resume runs it again
			continue
		}
		st.Done++
	}
	st.Planned = max(st.Planned, st.Done) // greedy rounds plan more as they go
	st.studyPath = resumeStudyPath(run)   // as run --resume finds it
	if st.Outcomes[string(store.Interrupted)] > 0 {
		st.Resume = resumeCommand(st.studyPath, run.Dir)
	}
	// the trial in flight: the newest log folder without a record
	entries, err := os.ReadDir(filepath.Join(run.Dir, "logs"))
	if err != nil {
		return
	}
	type cand struct {
		id  string
		mod int64
	}
	var cs []cand
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() && !recorded[e.Name()] {
			cs = append(cs, cand{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].mod > cs[j].mod })
	if len(cs) > 0 {
		st.InFlight = cs[0].id
	}
}

func printStatus(w io.Writer, st *runStatus) {
	fmt.Fprintf(w, "run: %s\n", st.RunDir)
	if st.Started {
		fmt.Fprintf(w, "study: %s\n", st.Study)
		fmt.Fprintf(w, "trials: %d of %d done", st.Done, st.Planned)
		if st.Skipped > 0 {
			fmt.Fprintf(w, " (%d more dropped by the planner)", st.Skipped)
		}
		fmt.Fprintln(w)
		if len(st.Outcomes) > 0 {
			fmt.Fprintf(w, "outcomes: %s\n", report.CountsText(st.Outcomes))
		}
		if st.Last != nil {
			fmt.Fprintf(w, "last: trial %s %s", st.Last.ID, st.Last.Outcome)
			if st.Last.Error != "" {
				fmt.Fprintf(w, ": %s", st.Last.Error)
			}
			fmt.Fprintln(w)
		}
		if st.InFlight != "" && (st.JobID == "" || !jobOver(st.JobState)) {
			fmt.Fprintf(w, "in flight: trial %s\n", st.InFlight)
		}
		if st.Unfinished != "" {
			fmt.Fprintf(w, "unfinished: trial %s started and has no record (--resume runs it again)\n", st.Unfinished)
		}
		if p := st.Progress; p != nil {
			fmt.Fprintf(w, "launches: %d of %d started, elapsed %s", p.Started, p.Planned, p.Elapsed)
			if p.ETA > 0 && st.State != "stopped" && st.State != "interrupted" && (st.JobID == "" || !jobOver(st.JobState)) {
				eta := "ETA"
				if p.AtMost {
					eta = "ETA at most" // repeats: auto stops trials early; a time budget ends the run
				}
				fmt.Fprintf(w, ", %s %s (at the pace of the %d finished)", eta, p.ETA, p.Finished)
			}
			fmt.Fprintln(w)
		}
	} else {
		fmt.Fprintln(w, "not started: the job has not created the run directory yet")
	}
	if st.JobID != "" {
		switch {
		case st.JobState != "":
			fmt.Fprintf(w, "slurm: job %s %s (%s)\n", st.JobID, st.JobState, st.StateFrom)
		default:
			fmt.Fprintf(w, "slurm: job %s, state unknown: %s\n", st.JobID, st.StateErr)
		}
		if st.JobOutput != "" {
			fmt.Fprintf(w, "job output: %s\n", st.JobOutput)
		}
	}
	switch {
	case st.State == "running":
		if st.Writer != "" {
			fmt.Fprintf(w, "running: %s\n", st.Writer)
		} else {
			fmt.Fprintln(w, "running")
		}
	case st.State == "stopped":
		fmt.Fprintf(w, "stopped: no process holds the run's writer lock (killed or crashed) with %d of %d trials done; resume with: %s\n",
			st.Done, st.Planned, st.Resume)
	case st.Resume != "":
		fmt.Fprintf(w, "interrupted (%d trial(s)); resume with: %s\n", st.Outcomes[string(store.Interrupted)], st.Resume)
	case st.Started && st.Done >= st.Planned && (st.JobID == "" || jobOver(st.JobState)):
		if _, err := os.Stat(filepath.Join(st.RunDir, "report.html")); err == nil {
			fmt.Fprintf(w, "finished; reports: %s\n", filepath.Join(absPath(st.RunDir), "report.html"))
		} else {
			fmt.Fprintf(w, "finished; report with: %s\n", commandLine("report", absPath(st.RunDir)))
		}
	}
}

// jobOver says whether a Slurm state is final.
func jobOver(state string) bool {
	switch strings.Fields(state + " x")[0] { // "CANCELLED by 0" → CANCELLED
	case "x", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT", "SIGNALING":
		return false
	}
	return true
}
