package runner

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// oomWatch tells whether the kernel's OOM killer acted on the ranks during a
// launch: a rank SIGKILLed by it leaves no error message, only the count of
// OOM kills of the memory cgroup it runs in going up. The count is that of
// the runner's own memory cgroup, which its local ranks inherit (cgroup v2
// memory.events, v1 memory.oom_control; both count every kind of OOM kill of
// the cgroup's processes, a global OOM included), never the host's
// /proc/vmstat oom_kill: an unrelated process killed elsewhere on the host
// must not turn a rank's crash into an oom (audit N5).
type oomWatch struct {
	count  func() (uint64, bool)
	source string
	before uint64
	ok     bool
}

func newOOMWatch(count func() (uint64, bool)) oomWatch {
	source := "the OOM-kill count"
	if count == nil {
		path := ownMemoryCgroupEvents("/proc/self/cgroup", "/sys/fs/cgroup")
		source = path
		count = func() (uint64, bool) { return cgroupOOMKills(path) }
	}
	w := oomWatch{count: count, source: source}
	w.before, w.ok = count()
	return w
}

// killed describes the OOM kills since the launch started ("" when none).
func (w oomWatch) killed() string {
	if !w.ok {
		return ""
	}
	now, ok := w.count()
	if !ok || now <= w.before {
		return ""
	}
	return fmt.Sprintf("the kernel's OOM killer ended %d process(es) of the ranks' memory cgroup during the launch (%s oom_kill %d → %d): out of memory",
		now-w.before, w.source, w.before, now)
}

// ownMemoryCgroupEvents finds the file that counts OOM kills of the memory
// cgroup named in procCgroup (/proc/self/cgroup) under the cgroup file
// system at root: memory.events (v2) or memory.oom_control (v1); "" when
// there is none (no memory controller).
func ownMemoryCgroupEvents(procCgroup, root string) string {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return ""
	}
	var v1, v2 string
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	var candidates []string
	if v1 != "" {
		candidates = append(candidates, filepath.Join(root, "memory", filepath.Clean("/"+v1), "memory.oom_control"))
	}
	if v2 != "" {
		candidates = append(candidates, filepath.Join(root, filepath.Clean("/"+v2), "memory.events"),
			filepath.Join(root, "unified", filepath.Clean("/"+v2), "memory.events"))
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// cgroupOOMKills reads the "oom_kill N" line of a cgroup's memory.events or
// memory.oom_control.
func cgroupOOMKills(path string) (uint64, bool) {
	if path == "" {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
