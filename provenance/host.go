package provenance

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/internal/ansi"
	"github.com/casestudy/casestudy/store"
)

// ReadHost describes this machine: hostname, OS and kernel, CPU model, cores,
// memory, and the GPUs, driver and topology matrix when gpus has them (nil:
// none).
func ReadHost(gpus GPUs) store.Host {
	h := store.Host{OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	h.CPU = cpuModel()
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	if g, err := orNone(gpus).Info(); err == nil {
		h.Driver, h.CUDADriver, h.GPUs = g.Driver, g.CUDADriver, g.GPUs
	}
	h.TopoMatrix = TopoMatrix()
	return h
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// NvidiaSMI is the nvidia-smi binary, "" when absent.
func NvidiaSMI() string {
	if p, err := exec.LookPath("nvidia-smi"); err == nil {
		return p
	}
	if p := "/usr/local/nvidia/bin/nvidia-smi"; isExec(p) {
		return p
	}
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// TopoMatrix is the text of `nvidia-smi topo -m` without terminal escapes
// (nvidia-smi underlines its header), "" when nvidia-smi is absent or fails.
func TopoMatrix() string {
	smi := NvidiaSMI()
	if smi == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, smi, "topo", "-m").Output()
	if err != nil {
		return ""
	}
	return ansi.Strip(string(out))
}

// relevantPrefixes are the variables recorded in the manifest: they change
// how NCCL, CUDA, OpenMP and casestudy behave.
var relevantPrefixes = []string{"NCCL_", "CUDA_", "OMP_", "CASESTUDY_", "TORCH_", "MKL_", "OPENBLAS_"}

// RelevantEnv picks the variables of environ that affect a run (NCCL_*,
// CUDA_*, OMP_*, CASESTUDY_* and the BLAS/torch thread settings).
func RelevantEnv(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if k == "CASESTUDY_TOKEN" { // a rendezvous secret (a parent run's, inherited): never written down (audit B-11 note)
			continue
		}
		for _, p := range relevantPrefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// FreeBytes is the space available to this user on the filesystem of path (or
// of its nearest existing parent: the results folder may not exist yet).
func FreeBytes(path string) (uint64, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		if parent := filepath.Dir(p); parent != p {
			p = parent
			continue
		}
		return 0, err
	}
}
