// Package rendezvous is how a trial's ranks meet the runner: a TCP server
// (loopback for local runs) speaking JSON lines. A rank joins with the trial's
// token and its rank number and gets its engine configuration back; then it
// exchanges keys (the NCCL unique id), meets the other ranks at barriers and
// streams heartbeats, engine facts, step metrics, its checksum, and finally
// done or an error. docs/architecture.md ("Worker protocol") describes it.
package rendezvous

import (
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
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
	TypeHeartbeat = "heartbeat" // rank → runner: the last completed step and the communication progress (every ~1 s)
	TypeMark      = "mark"      // rank → runner: name, at (a timeline mark: the end of a phase)
	TypeInfo      = "info"      // rank → runner: engine.Info of the created engine
	TypeStep      = "step"      // rank → runner: one step's metrics, warm-up or measured
	TypeChecksum  = "checksum"  // rank → runner: parameter checksum after the last step
	TypeProfile   = "profile"   // rank → runner: where the profiled steps after the measured ones went
	TypeDone      = "done"      // rank → runner: finished cleanly (reply: ok)
	TypeError     = "error"     // rank → runner: status (failed|oom|unsupported|comm), message (reply: ok)
	TypeSignal    = "signal"    // rank → runner: the signal it received and will end by (reply: ok)
)

// StatusComm is the error status of a failed collective: often the symptom of
// a peer that ended, so it gives way to a rank that ended by itself.
const StatusComm = "comm"

// Message is one JSON line in either direction.
type Message struct {
	Type     string               `json:"type"`
	ID       int64                `json:"id,omitempty"`
	Token    string               `json:"token,omitempty"`
	Role     string               `json:"role,omitempty"` // hello: "" a rank, RoleStore a store connection
	Rank     int                  `json:"rank"`
	Key      string               `json:"key,omitempty"`
	Value    string               `json:"value,omitempty"`
	Name     string               `json:"name,omitempty"`
	Step     int                  `json:"step,omitempty"`
	At       int64                `json:"at,omitempty"` // mark: wall clock, ns since the Unix epoch
	Warmup   bool                 `json:"warmup,omitempty"`
	Welcome  *Welcome             `json:"welcome,omitempty"`
	Info     *engine.Info         `json:"info,omitempty"`
	Metrics  *engine.StepMetrics  `json:"metrics,omitempty"`
	Checksum *engine.Checksum     `json:"checksum,omitempty"`
	Profile  *profile.Summary     `json:"profile,omitempty"`
	Progress *engine.CommProgress `json:"progress,omitempty"` // heartbeat: collectives issued and completed
	Status   string               `json:"status,omitempty"`
	Signal   string               `json:"signal,omitempty"`
	Message  string               `json:"message,omitempty"`
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
	// WarmupSeconds and MeasureSeconds are floors on the warm-up's and the
	// measured window's wall clock (0: none): the rank runs more steps, in
	// calls of up to 20, until each lasted that long; rank 0 decides for
	// every rank (key window/<phase>/<n>) so that they run the same steps.
	WarmupSeconds  float64 `json:"warmup_seconds,omitempty"`
	MeasureSeconds float64 `json:"measure_seconds,omitempty"`
	// Profile, when set, asks for a profile after the measured steps (knob
	// profile): every rank profiles the same steps and writes its trace.
	Profile *ProfilePlan `json:"profile,omitempty"`
	// DevicePerLocalRank, when > 0, is the ranks sharing one GPU on a node
	// whose every GPU the rank sees (launch.Slurm): the rank's device index
	// is its local rank (SLURM_LOCALID) divided by it, not Config.DeviceIndex.
	DevicePerLocalRank int `json:"device_per_local_rank,omitempty"`
}

// ProfilePlan is what a rank profiles after its measured steps.
type ProfilePlan struct {
	Steps     int    `json:"steps"`
	TracePath string `json:"trace_path"` // absolute; "" writes no trace
}

// Environment variables the launcher gives every rank.
const (
	EnvAddr  = "CASESTUDY_RENDEZVOUS" // host:port of the runner's rendezvous
	EnvToken = "CASESTUDY_TOKEN"      // the trial's token
	EnvRank  = "CASESTUDY_RANK"       // this process's rank
)

// maxLine bounds one JSON line of a joined rank (step metrics with buckets
// stay far below it); maxHelloLine bounds the first line of a connection,
// read before its token is checked; maxUnauthenticated bounds the
// connections that have not said hello yet.
const (
	maxLine            = 16 << 20
	maxHelloLine       = 4 << 10
	maxUnauthenticated = 64
)

// KeyGo is the key the runner sets when a launch may touch the GPU: ranks get
// it after loading the engine library and before creating the engine. A
// launch prepared while the previous one runs waits there.
const KeyGo = "go"
