package launch

import (
	"fmt"
	"strings"
	"unicode"
)

// CheckSetting checks one launcher setting of a study (launcher.KEY) before
// anything is written or submitted. Values that become #SBATCH lines keep to
// the characters Slurm's own names use, so no value can end a line of the
// batch script or be read by a shell.
func CheckSetting(key, value string) error {
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

// nameChars are the characters of Slurm partition, account, QOS and
// reservation names (and of comma-separated lists of them).
func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-,@+", r)
}

func slurmName(value, more string) error {
	if value == "" {
		return fmt.Errorf("is empty; leave the key out instead")
	}
	for _, r := range value {
		if !isNameChar(r) && !strings.ContainsRune(more, r) {
			return fmt.Errorf("%q has a character Slurm names do not use (%q); use letters, digits and %s",
				value, r, strings.Join(strings.Split("_.-,@+"+more, ""), " "))
		}
	}
	return nil
}
