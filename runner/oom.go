package runner

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// oomWatch tells whether the kernel's OOM killer acted during a launch: a
// rank SIGKILLed by it leaves no error message, only the kernel's count of
// OOM kills (/proc/vmstat oom_kill, every kind of OOM kill, cgroup limits
// included) going up.
type oomWatch struct {
	count  func() (uint64, bool)
	before uint64
	ok     bool
}

func newOOMWatch(count func() (uint64, bool)) oomWatch {
	if count == nil {
		count = kernelOOMKills
	}
	w := oomWatch{count: count}
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
	return fmt.Sprintf("the kernel's OOM killer ended %d process(es) during the launch (/proc/vmstat oom_kill %d → %d): out of host memory",
		now-w.before, w.before, now)
}

// kernelOOMKills reads oom_kill from /proc/vmstat (Linux 4.13 and later).
func kernelOOMKills() (uint64, bool) {
	f, err := os.Open("/proc/vmstat")
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
