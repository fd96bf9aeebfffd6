package launch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildEnv(t *testing.T) {
	parent := []string{"PATH=/bin", "NCCL_ALGO=Tree", "NCCL_PROTO=LL", "HOME=/root"}
	for _, tc := range []struct {
		desc  string
		set   map[string]string
		unset []string
		want  []string
	}{
		{"auto unsets what the parent set", nil, []string{"NCCL_ALGO"}, []string{"PATH=/bin", "NCCL_PROTO=LL", "HOME=/root"}},
		{"set replaces the parent's value", map[string]string{"NCCL_PROTO": "Simple"}, nil,
			[]string{"PATH=/bin", "NCCL_ALGO=Tree", "HOME=/root", "NCCL_PROTO=Simple"}},
		{"both, sorted additions", map[string]string{"B": "2", "A": "1"}, []string{"NCCL_ALGO", "NOT_THERE"},
			[]string{"PATH=/bin", "NCCL_PROTO=LL", "HOME=/root", "A=1", "B=2"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, BuildEnv(parent, tc.set, tc.unset))
		})
	}
}

func TestGPUMapping(t *testing.T) {
	vis := VisibleGPUs([]string{"CUDA_VISIBLE_DEVICES=4, 5,6"}, 8)
	assert.Equal(t, []string{"4", "5", "6"}, vis)
	assert.Equal(t, []string{"0", "1"}, VisibleGPUs(nil, 2))
	assert.Empty(t, VisibleGPUs([]string{"CUDA_VISIBLE_DEVICES="}, 2))
	for _, tc := range []struct {
		rank, ppg int
		want      string
	}{
		{0, 1, "4"}, {2, 1, "6"}, {3, 1, ""}, {1, 2, "4"}, {2, 2, "5"}, {5, 2, "6"}, {0, 0, "4"},
	} {
		assert.Equal(t, tc.want, GPUFor(tc.rank, tc.ppg, vis), "rank %d ppg %d", tc.rank, tc.ppg)
	}
}

func collect(t *testing.T, g Group) map[int]Exit {
	t.Helper()
	out := map[int]Exit{}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-g.Exits():
			if !ok {
				return out
			}
			out[e.Rank] = e
		case <-timeout:
			t.Fatal("ranks did not end")
		}
	}
}

func TestLocalExitCodesSignalsLogs(t *testing.T) {
	var logs [3]bytes.Buffer
	f, err := os.Create(filepath.Join(t.TempDir(), "rank2.log"))
	require.NoError(t, err)
	defer f.Close()
	spec := Spec{Trial: "t", Path: "/bin/sh", Args: []string{"-c", `echo "rank $R env $FOO"; case $R in 0) exit 0;; 1) exit 3;; 2) kill -ABRT $$;; esac`}}
	for r := 0; r < 3; r++ {
		var w = any(&logs[r])
		if r == 2 {
			w = f
		}
		spec.Ranks = append(spec.Ranks, Rank{Rank: r, Env: BuildEnv(os.Environ(), map[string]string{"R": string(rune('0' + r)), "FOO": "bar"}, nil), Log: w.(interface{ Write([]byte) (int, error) })})
	}
	g, err := Local{}.Start(context.Background(), spec)
	require.NoError(t, err)
	exits := collect(t, g)
	require.Len(t, exits, 3)
	assert.Equal(t, 0, exits[0].Code)
	assert.Equal(t, 3, exits[1].Code)
	assert.Equal(t, "SIGABRT", exits[2].Signal)
	assert.True(t, exits[2].Killed())
	assert.Equal(t, "rank 0 env bar\n", logs[0].String())
	b, _ := os.ReadFile(f.Name())
	assert.Equal(t, "rank 2 env bar\n", string(b))
}

func TestLocalKillReachesTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	// each rank starts a grandchild (sleep) and waits; the kill must reach both.
	spec := Spec{Trial: "t", Path: "/bin/sh", Args: []string{"-c", `trap '' TERM; sleep 60 & echo $! >> ` + pidFile + `; while :; do sleep 0.05; done`}}
	for r := 0; r < 2; r++ {
		spec.Ranks = append(spec.Ranks, Rank{Rank: r, Env: os.Environ(), Log: &bytes.Buffer{}})
	}
	g, err := Local{}.Start(context.Background(), spec)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(pidFile)
		return len(strings.Fields(string(b))) == 2
	}, 5*time.Second, 10*time.Millisecond)
	start := time.Now()
	g.Kill(200 * time.Millisecond)
	g.Kill(200 * time.Millisecond) // idempotent
	exits := collect(t, g)
	assert.Less(t, time.Since(start), 5*time.Second)
	var sigs []string
	for _, e := range exits {
		sigs = append(sigs, e.Signal)
	}
	sort.Strings(sigs)
	// everything ignores SIGTERM and dies by SIGKILL after the grace
	assert.Equal(t, []string{"SIGKILL", "SIGKILL"}, sigs)
	b, _ := os.ReadFile(pidFile)
	for _, p := range strings.Fields(string(b)) {
		var pid int
		_, _ = fmt.Sscan(p, &pid)
		assert.Eventually(t, func() bool { return gone(pid) }, 2*time.Second, 10*time.Millisecond,
			"grandchild %d survived", pid)
	}
}

func TestLocalStartFailureIsAnError(t *testing.T) {
	_, err := Local{}.Start(context.Background(), Spec{Trial: "t", Path: "/nonexistent/casestudy", Ranks: []Rank{{Rank: 0, Log: &bytes.Buffer{}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting rank 0")
}

// gone says whether process pid has ended: no such process, or a zombie (an
// orphan waits for whatever reaps orphans on this machine, which need not be
// quick inside a container).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// the state follows the command name in parentheses, which may hold spaces
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
