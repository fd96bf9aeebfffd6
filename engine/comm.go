package engine

// CommProgress is a rank's communication progress (cs_comm_progress): what its
// communicators were handed and finished since the engine was created. The
// runner carries it in heartbeats, so that when a collective hangs the rank
// that is behind can be named (PyTorch's watchdog reports the same pair:
// "last enqueued work", "last completed work").
type CommProgress struct {
	Issued    int64  `json:"collectives_issued"`
	Completed int64  `json:"collectives_completed"`
	LastOp    string `json:"last_op,omitempty"`
	Step      int64  `json:"step"`   // the step the trainer is in (-1 before the first)
	Bucket    int    `json:"bucket"` // the DDP bucket launched last in this step (-1: none yet)
	// PendingMS is how long the rank has waited with collectives outstanding
	// since its last one completed (0 when none is outstanding).
	PendingMS  float64 `json:"pending_ms"`
	DeadlineMS int     `json:"deadline_ms"` // the per-collective deadline in force
	Failed     bool    `json:"failed"`
	Failure    string  `json:"failure,omitempty"`
}

// Outstanding is how many collectives the rank issued and has not seen end.
func (p CommProgress) Outstanding() int64 { return p.Issued - p.Completed }
