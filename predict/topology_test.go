package predict

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every topology file loads, and its model reproduces each published point
// it asserts, within that point's tolerance.
func TestTopologiesReproduceTheirPublishedPoints(t *testing.T) {
	names := Topologies()
	if len(names) < 4 {
		t.Fatalf("topologies: %v", names)
	}
	rows, err := Reproduce()
	if err != nil {
		t.Fatal(err)
	}
	asserted := 0
	for _, r := range rows {
		t.Logf("%s %s n=%d %s: published %.1f, model %.1f (%s) %+.1f%%", r.Topology, r.Point.Op, r.Point.Ranks,
			sizeText(r.Point.Bytes), r.Point.BusBW, r.ModelBus, r.How, 100*r.Error)
		if r.Point.Tolerance > 0 {
			asserted++
			if math.Abs(r.Error) > r.Point.Tolerance {
				t.Errorf("%s: model %.1f GB/s against published %.1f (%s): %+.1f%%, tolerance %.0f%%",
					r.Topology, r.ModelBus, r.Point.BusBW, r.Point.Source, 100*r.Error, 100*r.Point.Tolerance)
			}
		}
	}
	if asserted < 5 {
		t.Errorf("only %d published points asserted", asserted)
	}
}

// NCCL's own picks: small all-reduces on LL, large ones on Simple; busbw
// grows with size; an 8-GPU ring all-reduce's latency is NCCL's closed form.
func TestNCCLModelShape(t *testing.T) {
	topo, err := LoadTopology("h100-sxm-8")
	if err != nil {
		t.Fatal(err)
	}
	m := NCCL{Topo: topo}
	_, small, _ := m.Time(AllReduce, 1024, 8)
	_, large, _ := m.Time(AllReduce, 1<<30, 8)
	if !strings.HasSuffix(small, "/LL") || !strings.HasSuffix(large, "/Simple") {
		t.Errorf("choices: 1 KiB %s, 1 GiB %s", small, large)
	}
	est, err := m.Estimates(AllReduce, 1<<30, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range est {
		if e.Algo == "Ring" && e.Proto == "Simple" {
			// baseLat 8.4 + 2(n-1) steps x 3.4 µs; busBw 12 x 30, algbw x n/(2(n-1)).
			if math.Abs(e.LatUS-(8.4+14*3.4)) > 1e-9 || math.Abs(e.AlgBW-360*8.0/14) > 1e-9 {
				t.Errorf("Ring/Simple: lat %g µs, algbw %g", e.LatUS, e.AlgBW)
			}
		}
	}
	prev := 0.0
	for n := int64(1 << 10); n <= 1<<32; n <<= 2 {
		ms, _, _ := m.Time(AllReduce, n, 8)
		bus := BusBW(AllReduce, n, 8, ms)
		if bus < prev {
			t.Errorf("busbw falls at %d bytes: %g after %g", n, bus, prev)
		}
		prev = bus
	}
	if _, _, err := m.Time(AllReduce, 1<<20, 16); err == nil {
		t.Error("16 ranks on an 8-GPU topology accepted")
	}
	if _, _, err := (NCCL{Topo: topo, Algo: "Tree"}).Time(AllGather, 1<<20, 8); err == nil {
		t.Error("a tree all-gather accepted")
	}
}

func TestLoadTopologyErrors(t *testing.T) {
	if _, err := LoadTopology("nope"); err == nil || !strings.Contains(err.Error(), "h100-sxm-8") {
		t.Errorf("unknown name: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"name":"x","nodes":1,"gpus_per_node":2,"intra":"nvlink","compute_capability":90,
		"ring":{"channels":1,"bw_intra_gbs":1},"nvls":true,"sources":["s"]}`), 0o644)
	if _, err := LoadTopology(bad); err == nil || !strings.Contains(err.Error(), "nvls") {
		t.Errorf("nvls true: %v", err)
	}
	os.WriteFile(bad, []byte(`{"name":"x","nodes":1,"gpus_per_node":2,"intra":"nvlink","compute_capability":90,
		"ring":{"channels":1,"bw_intra_gbs":1},"sources":[]}`), 0o644)
	if _, err := LoadTopology(bad); err == nil || !strings.Contains(err.Error(), "sources") {
		t.Errorf("no sources: %v", err)
	}
	os.WriteFile(bad, []byte(`{"name":"x","typo":1}`), 0o644)
	if _, err := LoadTopology(bad); err == nil || !strings.Contains(err.Error(), "typo") {
		t.Errorf("unknown field: %v", err)
	}
}
