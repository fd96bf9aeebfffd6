package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/testtar"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/store"
)

// The rehearsals of studies/gpt/tp.yaml (GPT-2 350M, 8 ranks on one H100
// 80 GB) whose measurements hold the tensor-parallel estimate.
var tpMeasuredRecords = []string{
	// tp 2 (9.02 GB), tp 2 SP (8.61 GB) at micro-batch 8; tp 4 at micro-batch 16 ran out of memory
	"gpu-check-2026-12-06f/rehearse.tgz",
	// tp 2 SP (8.61 GB); tp 4 SP at micro-batch 16 (8.35 GB), its fp32 twin's and tp 8 SP's out-of-memory
	"gpu-check-2026-12-07b/rehearse-a.tgz",
}

// tpOOM is an out-of-memory of a tensor-parallel launch: the config that ran
// out and what the error says (PyTorch's caching allocator's message).
type tpOOM struct {
	source             string
	cfg                engine.Config
	allocated, request int64 // the allocator's allocated bytes and the failed request: a lower bound of the peak
	outside            int64 // the process's memory in use less the allocator's allocated and reserved
	capacity           int64 // the GPU's total capacity as PyTorch saw it
}

var (
	oomRequest   = regexp.MustCompile(`Tried to allocate ([0-9.]+) (MiB|GiB)`)
	oomCapacity  = regexp.MustCompile(`total capacity of ([0-9.]+) (MiB|GiB)`)
	oomInUse     = regexp.MustCompile(`this process has ([0-9.]+) (MiB|GiB) memory in use`)
	oomAllocated = regexp.MustCompile(`Of the allocated memory ([0-9.]+) (MiB|GiB) is allocated by PyTorch, and ([0-9.]+) (MiB|GiB) is reserved`)
)

func oomBytes(t *testing.T, num, unit string) int64 {
	v, err := strconv.ParseFloat(num, 64)
	require.NoError(t, err)
	if unit == "GiB" {
		return int64(v * (1 << 30))
	}
	return int64(v * (1 << 20))
}

// parseOOM reads PyTorch's out-of-memory message; ok false when it is not one.
func parseOOM(t *testing.T, msg string) (o tpOOM, ok bool) {
	req, capy, use, alloc := oomRequest.FindStringSubmatch(msg), oomCapacity.FindStringSubmatch(msg),
		oomInUse.FindStringSubmatch(msg), oomAllocated.FindStringSubmatch(msg)
	if req == nil || capy == nil || use == nil || alloc == nil {
		return o, false
	}
	o.request, o.capacity = oomBytes(t, req[1], req[2]), oomBytes(t, capy[1], capy[2])
	o.allocated = oomBytes(t, alloc[1], alloc[2])
	o.outside = oomBytes(t, use[1], use[2]) - o.allocated - oomBytes(t, alloc[3], alloc[4])
	return o, true
}

type tpRecord struct {
	Outcome   store.Outcome         `json:"outcome"`
	ID        string                `json:"id"`
	Error     string                `json:"error"`
	Knobs     map[string]string     `json:"knobs"`
	Rehearsal *store.RehearsalTrial `json:"rehearsal"`
}

// loadTPMeasured reads the gpt-tp rehearsals of tpMeasuredRecords: the
// measured peaks (readPeaks), the out-of-memory errors of the trials and of
// their fp32 twins, and each run's GPU capacity (its manifest).
func loadTPMeasured(t *testing.T) (peaks []measuredPeak, ooms []tpOOM, capacity map[string]int64) {
	t.Helper()
	capacity = map[string]int64{}
	for _, rel := range tpMeasuredRecords {
		var desc engine.Description
		var rows [][]byte
		testtar.Walk(t, filepath.Join("..", "results", "reference", rel), func(name string, data []byte) {
			if !strings.Contains(name, "gpt-tp/") {
				return
			}
			switch {
			case strings.HasSuffix(name, "manifest.json"):
				var m store.Manifest
				require.NoError(t, json.Unmarshal(data, &m), rel)
				require.NotNil(t, m.Rehearsal, rel)
				capacity[rel] = m.Rehearsal.GPUMemoryBytes
			case strings.HasSuffix(name, "trials.jsonl"):
				for _, p := range readPeaks(t, rel+":"+name, bytes.NewReader(data)) {
					desc = p.desc
					peaks = append(peaks, p)
				}
				sc := bufio.NewScanner(bytes.NewReader(data))
				sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
				for sc.Scan() {
					rows = append(rows, append([]byte(nil), sc.Bytes()...))
				}
			}
		})
		for _, row := range rows { // the out-of-memory launches, described as the trials that ran
			var rec tpRecord
			require.NoError(t, json.Unmarshal(row, &rec), rel)
			if rec.Rehearsal == nil {
				continue
			}
			cfg := engine.Config{Family: desc.Family, Preset: desc.Preset, Dist: engine.DistConfig{WorldSize: rec.Rehearsal.Ranks}}
			require.NoError(t, knobs.EngineConfig(rec.Knobs, &cfg), rel)
			cfg.Family, cfg.Dist.WorldSize = "gpt", rec.Rehearsal.Ranks
			if o, ok := parseOOM(t, rec.Error); ok && rec.Outcome == store.OOM {
				o.source, o.cfg = rel+" "+rec.ID, cfg
				ooms = append(ooms, o)
			}
			if tw := rec.Rehearsal.TwinFP32; tw != nil && tw.Outcome == store.OOM {
				if o, ok := parseOOM(t, tw.Error); ok {
					o.source, o.cfg = rel+" "+rec.ID+" fp32 twin", cfg
					o.cfg.Precision, o.cfg.MicroBatch = "fp32", tw.MicroBatch
					ooms = append(ooms, o)
				}
			}
		}
		require.NotZero(t, desc.Params, "%s: no measured GPT-2 350M peak", rel)
		for i := range ooms {
			if ooms[i].cfg.Preset == "" || strings.HasPrefix(ooms[i].source, rel) {
				ooms[i].cfg.Preset = desc.Preset
			}
		}
	}
	return peaks, ooms, capacity
}

// TestRankEstimateTensorParallelMeasured holds the tensor-parallel estimate
// to what studies/gpt/tp.yaml's rehearsals measured on one H100 (8 ranks):
//   - every measured allocator peak of a tensor-parallel trial within 10%
//     (tp 2 with and without sequence parallelism at micro-batch 8, tp 4 with
//     it at micro-batch 16; the estimate was 14% short of tp 4 before);
//   - every out-of-memory (tp 4 at micro-batch 16 in -06f; tp 8 at
//     micro-batch 32 and tp 4's fp32 twin at micro-batch 16 in -07b, both
//     estimated to fit before): the estimate at least
//     the allocated bytes plus the failed request (a lower bound of the peak
//     it would have reached), so that 8 such ranks are refused on the GPU,
//     and the process's memory outside the allocator within processBytes;
//   - the trials that ran in gpu-check-2026-12-07b still fit 8 ranks on that
//     GPU (tp 2 without sequence parallelism, which ran in -06f at 92% of
//     the GPU, is now refused by the 90% rule: on the safe side).
//
// In-sample, stated: the whole-sequence and sharded activation sizes were
// fitted to tp 2 and tp 4 with sequence parallelism, and tpProcessBytes set
// from the two 0.74/0.80 GiB readings, so those assertions hold the fit to
// its own inputs; tp 2 without sequence parallelism and the out-of-memory
// lower bounds are the checks out of sample.
func TestRankEstimateTensorParallelMeasured(t *testing.T) {
	peaks, ooms, capacity := loadTPMeasured(t)
	points := map[int]int{}
	for _, m := range peaks {
		tp := tpDegree(m.cfg)
		if tp <= 1 {
			continue
		}
		points[tp]++
		est := float64(RankEstimate(m.cfg, m.desc) - processBytes(m.cfg))
		rel := est/float64(m.peak) - 1
		t.Logf("%-62s tp %d sp %-5v mb %2d  measured %5.2f GB, estimate %5.2f GB (%+.1f%%)", m.source, tp,
			m.cfg.TP.SequenceParallel, m.cfg.MicroBatch, float64(m.peak)/1e9, est/1e9, 100*rel)
		assert.InDelta(t, 0, rel, 0.10, "%s: estimate %.2f GB against a measured peak of %.2f GB", m.source, est/1e9, float64(m.peak)/1e9)
		if rel := tpMeasuredRecords[1]; strings.HasPrefix(m.source, rel) {
			assert.LessOrEqual(t, float64(m.cfg.Dist.WorldSize)*float64(RankEstimate(m.cfg, m.desc)), fitHeadroom*float64(capacity[rel]),
				"%s ran: its 8 ranks must not be refused", m.source)
		}
	}
	assert.GreaterOrEqual(t, points[2], 2, "tp 2 peaks")
	assert.GreaterOrEqual(t, points[4], 1, "tp 4 peaks")
	require.Len(t, ooms, 3, "tp 4's without sequence parallelism (06f), tp 8's and tp 4's fp32 twin's (07b) out-of-memory")
	desc := peaks[0].desc
	for _, o := range ooms {
		est := RankEstimate(o.cfg, desc)
		t.Logf("%-62s tp %d %s mb %2d  out of memory at %5.2f GB allocated + %4.0f MiB, %.2f GiB outside the allocator; estimate %5.2f GB",
			o.source, tpDegree(o.cfg), o.cfg.Precision, o.cfg.MicroBatch, float64(o.allocated)/1e9, float64(o.request)/(1<<20),
			float64(o.outside)/(1<<30), float64(est-processBytes(o.cfg))/1e9)
		assert.GreaterOrEqual(t, est-processBytes(o.cfg), o.allocated+o.request, "%s: the estimate is below what it was shown to need", o.source)
		assert.Greater(t, float64(o.cfg.Dist.WorldSize)*float64(est), fitHeadroom*float64(o.capacity), "%s: 8 ranks would not be refused", o.source)
		assert.LessOrEqual(t, o.outside, processBytes(o.cfg), "%s: the process outside the allocator", o.source)
	}
}
