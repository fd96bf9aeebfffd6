package report

import (
	"fmt"
	"slices"

	"github.com/casestudy/casestudy/internal/units"
	"github.com/casestudy/casestudy/store"
)

// Memory is the device memory a trial holds, per rank and over ranks, from
// the steps of its clean launches (ok, not tainted).
//
// Held is what the CUDA caching allocator reserved at its peak in a step
// (mem_reserved_bytes): the memory the trial takes from the GPU, the private
// pool of a captured CUDA graph included. Peak allocated (mem_peak_bytes)
// counts live tensors only; under CUDA graphs a replay allocates nothing, so
// it stays at the weights and optimizer state whatever the micro-batch and
// leaves out the graph's pool: it is never shown as what a trial needs.
// PoolAndCache is Held minus peak allocated: under graphs the capture pool
// (plus the allocator's cache), in eager mode the cache alone.
type Memory struct {
	HeldBytes          int64        `json:"held_bytes,omitempty"`           // max over ranks of the reserved peak; 0 = unknown (see NA)
	PeakAllocatedBytes int64        `json:"peak_allocated_bytes,omitempty"` // max over ranks
	PoolAndCacheBytes  int64        `json:"pool_and_cache_bytes,omitempty"` // held - peak allocated, on the rank that holds the most
	Graphs             bool         `json:"graphs,omitempty"`               // CUDA graphs replayed the step
	Ranks              []RankMemory `json:"ranks,omitempty"`
	// NA says why the memory held is not known ("" when it is).
	NA string `json:"na,omitempty"`
}

// RankMemory is one rank's memory, maxima over its steps in clean launches.
type RankMemory struct {
	Rank               int   `json:"rank"`
	HeldBytes          int64 `json:"held_bytes"`
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
}

// Reasons the memory held is not known.
const (
	naNoStep = "n/a: no clean launch measured a step"
	naCPU    = "n/a: CPU run (the engine has no device memory counters there)"
	naGraphs = "n/a under CUDA graphs: this run recorded no reserved bytes, and peak allocated leaves out the graph's pool"
)

// memoryOf reads a trial's memory from its record.
func memoryOf(rec *store.TrialRecord) *Memory {
	m := &Memory{Graphs: rec.Knobs["graphs"] == "true"}
	byRank := map[int]*RankMemory{}
	cpu, steps := false, 0
	for i := range rec.Repeats {
		r := &rec.Repeats[i]
		if r.Outcome != store.OK || r.Tainted != "" {
			continue
		}
		for _, rk := range r.Ranks {
			if rk.Info != nil && rk.Info.Device == "cpu" {
				cpu = true
			}
			rm := byRank[rk.Rank]
			if rm == nil {
				rm = &RankMemory{Rank: rk.Rank}
				byRank[rk.Rank] = rm
			}
			for _, s := range rk.Steps {
				steps++
				rm.HeldBytes = max(rm.HeldBytes, s.MemReservedBytes)
				rm.PeakAllocatedBytes = max(rm.PeakAllocatedBytes, s.MemPeakBytes)
			}
		}
	}
	for _, rm := range byRank {
		m.Ranks = append(m.Ranks, *rm)
	}
	slices.SortFunc(m.Ranks, func(a, b RankMemory) int { return a.Rank - b.Rank })
	var top *RankMemory
	for i := range m.Ranks {
		rm := &m.Ranks[i]
		m.PeakAllocatedBytes = max(m.PeakAllocatedBytes, rm.PeakAllocatedBytes)
		if top == nil || rm.HeldBytes > top.HeldBytes {
			top = rm
		}
	}
	switch {
	case steps == 0:
		m.NA = naNoStep
	case cpu:
		m.NA = naCPU
	case top == nil || top.HeldBytes == 0:
		if m.Graphs {
			m.NA = naGraphs
		} else {
			m.NA = "n/a: this run recorded no reserved bytes (peak allocated " + memText(m.PeakAllocatedBytes) + ")"
		}
	default:
		m.HeldBytes = top.HeldBytes
		m.PoolAndCacheBytes = max(0, top.HeldBytes-top.PeakAllocatedBytes)
	}
	if m.NA != "" {
		m.Ranks = nil
	}
	return m
}

// Held is the memory the trial holds, 0 when unknown.
func (t *Trial) Held() int64 {
	if t.Memory == nil {
		return 0
	}
	return t.Memory.HeldBytes
}

// memHeldText is the table cell: the memory held, or why it is unknown
// ("n/a" with the reason in short).
func memHeldText(t *Trial) string {
	switch m := t.Memory; {
	case m == nil:
		return "n/a"
	case m.NA != "":
		return "n/a (" + m.naShort() + ")"
	default:
		return units.Bytes(m.HeldBytes)
	}
}

// naShort is the reason in a few words, for a table cell.
func (m *Memory) naShort() string {
	switch m.NA {
	case naCPU:
		return "CPU"
	case naNoStep:
		return "no step measured"
	case naGraphs:
		return "graphs: reserved not recorded"
	}
	return "reserved not recorded"
}

// memTip says what the memory cell holds: reserved, allocated, the pool, per
// rank; or why it is unknown.
func memTip(t *Trial) string {
	m := t.Memory
	if m == nil {
		return "not measured"
	}
	if m.NA != "" {
		return m.NA
	}
	pool := "allocator cache"
	if m.Graphs {
		pool = "CUDA graph pool and allocator cache"
	}
	tip := fmt.Sprintf("held (reserved by the caching allocator) %s: peak allocated %s + %s %s",
		units.Bytes(m.HeldBytes), units.Bytes(m.PeakAllocatedBytes), pool, units.Bytes(m.PoolAndCacheBytes))
	if t.Layout.Sharded() {
		tip = t.Layout.String() + "; " + tip
	}
	if len(m.Ranks) > 1 {
		for _, r := range m.Ranks {
			tip += fmt.Sprintf("; rank %d %s held, %s allocated", r.Rank, units.Bytes(r.HeldBytes), units.Bytes(r.PeakAllocatedBytes))
		}
	}
	return tip
}

// memoryNote is the sentence under the table and in report.md that says
// what "memory held" is.
const memoryNote = "Memory held: the peak the CUDA caching allocator reserved in a step, the maximum over ranks " +
	"(a captured CUDA graph's private pool included); peak allocated counts live tensors only and, " +
	"under CUDA graphs, leaves out the graph's pool."

// memHeldCSV is the CSV cell: bytes held, "" when unknown.
func memHeldCSV(t *Trial) string {
	if t.Held() == 0 {
		return ""
	}
	return fmt.Sprint(t.Held())
}
