// Package setting checks a study's launcher settings (launcher.KEY, and the
// flags of run --submit that set them) before anything is written or
// submitted: values that become #SBATCH lines keep to the characters Slurm's
// own names use, and time limits parse. It imports nothing of casestudy, so
// that both study (which validates a study file) and launch (which writes
// the batch script) use it.
package setting

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Check checks one launcher setting of a study (launcher.KEY) before
// anything is written or submitted. Values that become #SBATCH lines keep to
// the characters Slurm's own names use, so no value can end a line of the
// batch script or be read by a shell.
func Check(key, value string) error {
	switch key {
	case "kind":
		if value != "local" && value != "slurm" {
			return fmt.Errorf("%q is not one of local | slurm", value)
		}
	case "partition", "account", "qos", "reservation":
		return slurmName(value, "")
	case "constraint":
		return slurmName(value, "&|[]*()!:")
	case "time_limit":
		if err := slurmName(value, ":"); err != nil {
			return err
		}
		_, err := ParseTimeLimit(value)
		return err
	case "rdzv_interface":
		return slurmName(value, ":")
	case "extra_args", "srun_args":
		if i := strings.IndexFunc(value, unicode.IsControl); i >= 0 {
			return fmt.Errorf("%q spans lines or holds a control character (0x%02x); give the arguments on one line", value, value[i])
		}
	}
	return nil
}

// NameChar says whether r is a character of Slurm partition, account, QOS
// and reservation names (and of comma-separated lists of them).
func NameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-,@+", r)
}

func slurmName(value, more string) error {
	if value == "" {
		return fmt.Errorf("is empty; leave the key out instead")
	}
	for _, r := range value {
		if !NameChar(r) && !strings.ContainsRune(more, r) {
			return fmt.Errorf("%q has a character Slurm names do not use (%q); use letters, digits and %s",
				value, r, strings.Join(strings.Split("_.-,@+"+more, ""), " "))
		}
	}
	return nil
}

var (
	slurmDHMS = regexp.MustCompile(`^(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?$`) // days-hours[:minutes[:seconds]]
	slurmHMS  = regexp.MustCompile(`^(\d+)(?::(\d+)(?::(\d+))?)?$`)       // minutes | minutes:seconds | hours:minutes:seconds
)

// ParseTimeLimit reads a job time limit in minutes (rounded up): a Go duration
// ("90m", "2h") or one of Slurm's forms ("30", "30:00", "2:00:00", "1-12",
// "1-12:30", "1-12:30:00").
func ParseTimeLimit(s string) (int, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("time limit %q: give minutes, hours:minutes:seconds, days-hours[:minutes], or a duration like 90m", s)
	num := func(x string) int { n, _ := strconv.Atoi(x); return n }
	var d time.Duration
	switch m := slurmHMS.FindStringSubmatch(s); {
	case m != nil && m[3] != "":
		d = time.Duration(num(m[1]))*time.Hour + time.Duration(num(m[2]))*time.Minute + time.Duration(num(m[3]))*time.Second
	case m != nil && m[2] != "":
		d = time.Duration(num(m[1]))*time.Minute + time.Duration(num(m[2]))*time.Second
	case m != nil:
		d = time.Duration(num(m[1])) * time.Minute
	default:
		if m := slurmDHMS.FindStringSubmatch(s); m != nil {
			d = time.Duration(num(m[1]))*24*time.Hour + time.Duration(num(m[2]))*time.Hour +
				time.Duration(num(m[3]))*time.Minute + time.Duration(num(m[4]))*time.Second
		} else if gd, err := time.ParseDuration(s); err == nil {
			d = gd
		} else {
			return 0, bad
		}
	}
	if d <= 0 {
		return 0, bad
	}
	return Minutes(d), nil
}

// Minutes is d in whole minutes, rounded up (Slurm's --time).
func Minutes(d time.Duration) int {
	return int((d + time.Minute - 1) / time.Minute)
}
