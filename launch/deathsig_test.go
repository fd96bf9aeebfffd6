package launch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if os.Getenv("CASESTUDY_TEST_LAUNCH_PARENT") == "1" {
		// a stand-in runner: start one rank (sleep), say its pid, wait to be killed
		g, err := Local{}.Start(context.Background(), Spec{Trial: "t", Path: "/bin/sleep", Args: []string{"60"},
			Ranks: []Rank{{Rank: 0, Env: os.Environ(), Log: os.Stderr}}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(g.(*localGroup).procs[0].Process.Pid)
		<-g.Exits()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRanksDieWithTheRunner: kill -9 of the runner takes its ranks along
// (Pdeathsig from a thread that never exits).
func TestRanksDieWithTheRunner(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "CASESTUDY_TEST_LAUNCH_PARENT=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, line)
	require.NoError(t, syscall.Kill(pid, 0), "the rank runs")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	assert.Eventually(t, func() bool {
		// the orphan is reaped by init once dead; a zombie counts as dead too
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	}, 5*time.Second, 10*time.Millisecond, "rank %d outlived the runner", pid)
}
