// Package rendezvous is how a trial's ranks meet the runner: a TCP server
// (loopback for local runs) speaking JSON lines. A rank joins with the trial's
// token and its rank number and gets its engine configuration back; then it
// exchanges keys (the NCCL unique id), meets the other ranks at barriers and
// streams heartbeats, engine facts, step metrics, its checksum, and finally
// done or an error. docs/architecture.md ("Worker protocol") describes it.
package rendezvous

import (
	"github.com/casestudy/casestudy/engine"
)

// Message types. Requests that expect a reply carry an ID, echoed in the reply.
const (
	TypeHello     = "hello"     // rank → runner: token, rank (reply: welcome or refused)
	TypeWelcome   = "welcome"   // runner → rank: the rank's Welcome
	TypeRefused   = "refused"   // runner → rank: why it may not join; the connection closes
	TypeSet       = "set"       // rank → runner: key, value (reply: ok)
	TypeGet       = "get"       // rank → runner: key (reply: value, once some rank set it)
	TypeValue     = "value"     // runner → rank: key, value
	TypeBarrier   = "barrier"   // rank → runner: name (reply: ok, once every rank arrived)
	TypeOK        = "ok"        // runner → rank: a request is done
	TypeHeartbeat = "heartbeat" // rank → runner: the last completed step (every ~1 s)
	TypeMark      = "mark"      // rank → runner: name, at (a timeline mark: the end of a phase)
	TypeInfo      = "info"      // rank → runner: engine.Info of the created engine
	TypeStep      = "step"      // rank → runner: one step's metrics, warm-up or measured
	TypeChecksum  = "checksum"  // rank → runner: parameter checksum after the last step
	TypeDone      = "done"      // rank → runner: finished cleanly (reply: ok)
	TypeError     = "error"     // rank → runner: status (failed|oom|unsupported), message (reply: ok)
)

// Message is one JSON line in either direction.
type Message struct {
	Type     string              `json:"type"`
	ID       int64               `json:"id,omitempty"`
	Token    string              `json:"token,omitempty"`
	Rank     int                 `json:"rank"`
	Key      string              `json:"key,omitempty"`
	Value    string              `json:"value,omitempty"`
	Name     string              `json:"name,omitempty"`
	Step     int                 `json:"step,omitempty"`
	At       int64               `json:"at,omitempty"` // mark: wall clock, ns since the Unix epoch
	Warmup   bool                `json:"warmup,omitempty"`
	Welcome  *Welcome            `json:"welcome,omitempty"`
	Info     *engine.Info        `json:"info,omitempty"`
	Metrics  *engine.StepMetrics `json:"metrics,omitempty"`
	Checksum *engine.Checksum    `json:"checksum,omitempty"`
	Status   string              `json:"status,omitempty"`
	Message  string              `json:"message,omitempty"`
}

// Welcome is what a rank gets when it joins: its engine configuration and how
// to run the trial.
type Welcome struct {
	Config      engine.Config `json:"config"`
	WarmupSteps int           `json:"warmup_steps"`
	Steps       int           `json:"steps"`
	HeartbeatMS int           `json:"heartbeat_ms"`
	EngineLib   string        `json:"engine_lib"` // the library the runner checked in preflight
	Ranks       int           `json:"ranks"`      // processes in the trial (barrier size)
}

// Environment variables the launcher gives every rank.
const (
	EnvAddr  = "CASESTUDY_RENDEZVOUS" // host:port of the runner's rendezvous
	EnvToken = "CASESTUDY_TOKEN"      // the trial's token
	EnvRank  = "CASESTUDY_RANK"       // this process's rank
)

// KeyGo is the key the runner sets when a launch may touch the GPU: ranks get
// it after loading the engine library and before creating the engine. A
// launch prepared while the previous one runs waits there.
const KeyGo = "go"

// maxLine bounds one JSON line (step metrics with buckets stay far below it).
const maxLine = 16 << 20
