package checklist

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// NCCL's tuning line (NCCL_DEBUG=INFO with the TUNING subsystem), printed by
// rank 0 for every collective it launches:
//
//	NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}
//
// Older releases print numbers: "Algo 1 proto 2".
var tuningLine = regexp.MustCompile(`NCCL INFO AllReduce: (\d+) Bytes -> Algo (\w+) proto (\w+)`)

var (
	algoByNumber  = []string{"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"}
	protoByNumber = []string{"LL", "LL128", "SIMPLE"}
)

// ncclChoice is how often NCCL chose each algorithm and protocol for the
// all-reduces of a trial, from rank 0's logs.
type ncclChoice struct {
	Algo  map[string]int // upper case: RING, TREE, NVLS ...
	Proto map[string]int // LL, LL128, SIMPLE
	N     int
}

// ncclChoices reads rank 0's logs of every repeat of t; nil when no tuning
// line was logged.
func (v *runView) ncclChoices(t *trial) *ncclChoice {
	if v.run.Dir == "" {
		return nil
	}
	ch := &ncclChoice{Algo: map[string]int{}, Proto: map[string]int{}}
	for _, rp := range t.rec.Repeats {
		f, err := os.Open(filepath.Join(v.run.Dir, store.LogName(t.ID, 0, rp.Repeat)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m := tuningLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			ch.Algo[ncclName(m[2], algoByNumber)]++
			ch.Proto[ncclName(m[3], protoByNumber)]++
			ch.N++
		}
		f.Close()
	}
	if ch.N == 0 {
		return nil
	}
	return ch
}

func ncclName(s string, byNumber []string) string {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < len(byNumber) {
		return byNumber[i]
	}
	return strings.ToUpper(s)
}

// only returns the single value NCCL chose every time ("" when it varied).
func only(counts map[string]int) string {
	if len(counts) != 1 {
		return ""
	}
	for k := range counts {
		return k
	}
	return ""
}

func (c *ncclChoice) String() string {
	var parts []string
	for _, k := range sortedKeys(c.Algo) {
		parts = append(parts, k+"×"+strconv.Itoa(c.Algo[k]))
	}
	var protos []string
	for _, k := range sortedKeys(c.Proto) {
		protos = append(protos, k+"×"+strconv.Itoa(c.Proto[k]))
	}
	return "algo " + strings.Join(parts, " ") + ", proto " + strings.Join(protos, " ")
}
