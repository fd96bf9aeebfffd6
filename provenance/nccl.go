package provenance

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// NCCL prints what its tuner chose for each collective with NCCL_DEBUG=INFO
// and the TUNING subsystem, on the communicator's rank 0 only. NCCL 2.19 and
// later (src/enqueue.cc) name the operation, the algorithm and the protocol,
// and newer releases append the communicator:
//
//	host:1234:1250 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}
//	host:1234:1250 [0] NCCL INFO AllReduce: 4 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0} comm 0x55a7a339db50
//
// Earlier releases print numbers, without the operation:
//
//	host:497888:497888 [0] NCCL INFO 262144 Bytes -> Algo 0 proto 1 time 54.707825
var tuningLine = regexp.MustCompile(`NCCL INFO (?:([A-Za-z]+): )?(\d+) Bytes -> Algo ([A-Za-z0-9_]+) proto ([A-Za-z0-9_]+)`)

// NCCL's numbering (NCCL_ALGO_* and NCCL_PROTO_* in src/include/devcomm.h).
var (
	ncclAlgoByNumber  = []string{"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"}
	ncclProtoByNumber = []string{"LL", "LL128", "SIMPLE"}
)

// NCCLDebugSubsys is the NCCL_DEBUG_SUBSYS every trial of a study that
// sweeps or forces an NCCL knob gets: NCCL's default subsystems plus TUNING,
// which prints the algorithm and protocol of every collective, and NET,
// which names the network transport.
const NCCLDebugSubsys = "INIT,BOOTSTRAP,ENV,NET,TUNING"

// NCCLTransportSubsys is the NCCL_DEBUG_SUBSYS of the other trials whose
// ranks form an NCCL communicator: lines printed at init only (which
// transport each channel uses), none per collective.
const NCCLTransportSubsys = "INIT,BOOTSTRAP,ENV,NET"

// ParseNCCLTuning counts NCCL's tuning lines in a log by operation, algorithm
// and protocol; nil when there is none.
func ParseNCCLTuning(r io.Reader) (*store.NCCLTuning, error) {
	type key struct{ op, algo, proto string }
	counts := map[key]*store.NCCLChoice{}
	lines := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "Bytes -> Algo") {
			continue
		}
		m := tuningLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k := key{m[1], NCCLName(byNumber(m[3], ncclAlgoByNumber)), NCCLName(byNumber(m[4], ncclProtoByNumber))}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		c := counts[k]
		if c == nil {
			c = &store.NCCLChoice{Op: k.op, Algo: k.algo, Proto: k.proto, MinBytes: n, MaxBytes: n}
			counts[k] = c
		}
		c.Count++
		c.MinBytes, c.MaxBytes = min(c.MinBytes, n), max(c.MaxBytes, n)
		lines++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if lines == 0 {
		return nil, nil
	}
	t := &store.NCCLTuning{Lines: lines}
	for _, c := range counts {
		t.Choices = append(t.Choices, *c)
	}
	sort.Slice(t.Choices, func(i, j int) bool {
		a, b := t.Choices[i], t.Choices[j]
		if a.Op != b.Op {
			return a.Op < b.Op
		}
		if a.Algo != b.Algo {
			return a.Algo < b.Algo
		}
		return a.Proto < b.Proto
	})
	return t, nil
}

// ReadNCCLTuning parses the log at path; nil when it has no tuning line or
// cannot be read.
func ReadNCCLTuning(path string) *store.NCCLTuning {
	return readParsed(path, ParseNCCLTuning)
}

// NCCLName is an algorithm or protocol name as NCCL's tuning lines print it:
// upper case with '_' between words, so the knob values (NCCL_ALGO=NVLSTree,
// CollnetDirect; NCCL_PROTO=Simple) compare with the log's NVLS_TREE,
// COLLNET_DIRECT and SIMPLE.
func NCCLName(s string) string {
	u := strings.ToUpper(strings.TrimSpace(s))
	switch strings.ReplaceAll(u, "_", "") {
	case "NVLSTREE":
		return "NVLS_TREE"
	case "COLLNETDIRECT":
		return "COLLNET_DIRECT"
	case "COLLNETCHAIN":
		return "COLLNET_CHAIN"
	}
	return u
}

func byNumber(s string, names []string) string {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < len(names) {
		return names[i]
	}
	return s
}

// NCCLEvidence is whether NCCL used a forced algorithm or protocol for a
// trial's all-reduces (the gradient reductions the knob is about).
type NCCLEvidence struct {
	Knob     string   `json:"knob"`   // nccl.algo | nccl.proto
	Forced   string   `json:"forced"` // the knob's value
	Lines    int      `json:"lines"`  // all-reduce tuning lines of every rank and launch
	Matching int      `json:"matching"`
	Used     []string `json:"used,omitempty"` // what NCCL used, "RING×12"
}

// Evidence states.
const (
	NCCLUsed       = "used"
	NCCLNotUsed    = "not used"
	NCCLNoEvidence = "no evidence"
)

// Status is NCCLUsed when every all-reduce used the forced value, NCCLNotUsed
// when some did not, NCCLNoEvidence without tuning lines.
func (e NCCLEvidence) Status() string {
	switch {
	case e.Lines == 0:
		return NCCLNoEvidence
	case e.Matching == e.Lines:
		return NCCLUsed
	}
	return NCCLNotUsed
}

func (e NCCLEvidence) String() string {
	switch e.Status() {
	case NCCLNoEvidence:
		return fmt.Sprintf("%s=%s: no NCCL tuning lines in the ranks' logs", e.Knob, e.Forced)
	case NCCLUsed:
		return fmt.Sprintf("%s=%s: NCCL used it for all %d all-reduces", e.Knob, e.Forced, e.Lines)
	}
	return fmt.Sprintf("%s=%s: NCCL used %s for the all-reduces (%d of %d with the forced value)",
		e.Knob, e.Forced, strings.Join(e.Used, ", "), e.Matching, e.Lines)
}

// CheckForcedNCCL compares a forced nccl.algo or nccl.proto value with what
// NCCL chose for the all-reduces recorded in tunings (lines that name no
// operation count as all-reduces: old releases, where the engine issues no
// other collective). A value NCCL_ALGO/NCCL_PROTO reads as a list or an
// exclusion ("Ring,Tree", "^LL128") matches any of the names it allows.
func CheckForcedNCCL(knob, forced string, tunings []*store.NCCLTuning) NCCLEvidence {
	e := NCCLEvidence{Knob: knob, Forced: forced}
	allowed := forcedSet(forced)
	used := map[string]int{}
	for _, t := range tunings {
		if t == nil {
			continue
		}
		for _, c := range t.Choices {
			if c.Op != "" && c.Op != "AllReduce" {
				continue
			}
			name := c.Algo
			if knob == "nccl.proto" {
				name = c.Proto
			}
			e.Lines += c.Count
			used[name] += c.Count
			if allowed(name) {
				e.Matching += c.Count
			}
		}
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.Used = append(e.Used, fmt.Sprintf("%s×%d", n, used[n]))
	}
	return e
}

// forcedSet reads an NCCL_ALGO/NCCL_PROTO value: a comma-separated list, or
// all but the list after '^'.
func forcedSet(v string) func(string) bool {
	exclude := strings.HasPrefix(v, "^")
	set := map[string]bool{}
	for _, s := range strings.Split(strings.TrimPrefix(v, "^"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			set[NCCLName(s)] = true
		}
	}
	return func(name string) bool { return set[name] != exclude }
}
