package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MPSControlName is NVIDIA's MPS control binary.
const MPSControlName = "nvidia-cuda-mps-control"

// FindMPSControl looks for nvidia-cuda-mps-control on path (a PATH value) and
// in /usr/local/nvidia/bin; "" when absent.
func FindMPSControl(path string) string {
	dirs := append(strings.Split(path, ":"), "/usr/local/nvidia/bin")
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := d + "/" + MPSControlName
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// mpsDaemon is one trial's MPS control daemon with its own pipe and log folders.
type mpsDaemon struct {
	control string
	pipe    string
	log     string
	env     []string // what the daemon and the ranks share
}

// startMPS starts `nvidia-cuda-mps-control -d` with fresh
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY (temporary folders).
func startMPS(ctx context.Context, control string, parentEnv []string) (*mpsDaemon, error) {
	pipe, err := os.MkdirTemp("", "casestudy-mps-pipe-")
	if err != nil {
		return nil, err
	}
	logDir, err := os.MkdirTemp("", "casestudy-mps-log-")
	if err != nil {
		os.RemoveAll(pipe)
		return nil, err
	}
	d := &mpsDaemon{control: control, pipe: pipe, log: logDir,
		env: []string{"CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + logDir}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, control, "-d")
	cmd.Env = append(append([]string(nil), parentEnv...), d.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		d.cleanup()
		return nil, fmt.Errorf("starting the MPS daemon (%s -d): %v: %s", control, err, strings.TrimSpace(string(out)))
	}
	return d, nil
}

// Env is what every rank of the trial needs to reach the daemon; pct > 0 also
// limits each client to that share of the SMs.
func (d *mpsDaemon) Env(pct int) map[string]string {
	m := map[string]string{}
	for _, kv := range d.env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	if pct > 0 {
		m["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = strconv.Itoa(pct)
	}
	return m
}

// Stop asks the daemon to quit (`echo quit | nvidia-cuda-mps-control` with the
// same folders), returns its control log (which records the clients that
// connected) and removes the folders.
func (d *mpsDaemon) Stop(parentEnv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.control)
	cmd.Env = append(append([]string(nil), parentEnv...), d.env...)
	cmd.Stdin = strings.NewReader("quit\n")
	out, err := cmd.CombinedOutput()
	time.Sleep(200 * time.Millisecond) // the daemon writes its last lines as it exits
	log, _ := os.ReadFile(filepath.Join(d.log, "control.log"))
	d.cleanup()
	if err != nil {
		return log, fmt.Errorf("stopping the MPS daemon: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return log, nil
}

func (d *mpsDaemon) cleanup() {
	os.RemoveAll(d.pipe)
	os.RemoveAll(d.log)
}
