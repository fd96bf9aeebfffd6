package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchScriptRunsNoInjectedCommand: a value of a #SBATCH line built to
// end that line and start a shell command (issue 21, defect 1) either stops
// the script from being written or stays inside its quoted #SBATCH line:
// running the script under bash never creates the marker file.
func TestBatchScriptRunsNoInjectedCommand(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	inject := []string{
		"gpu\ntouch " + marker,
		"gpu\rtouch " + marker,
		"gpu\n#SBATCH --x\ntouch " + marker,
		"gpu $(touch " + marker + ")",
		"gpu`touch " + marker + "`",
		`gpu" ; touch ` + marker + ` #`,
		"gpu' ; touch " + marker + " #",
	}
	set := []func(b *Batch, v string){
		func(b *Batch, v string) { b.Partition = v },
		func(b *Batch, v string) { b.Account = v },
		func(b *Batch, v string) { b.QOS = v },
		func(b *Batch, v string) { b.Reservation = v },
		func(b *Batch, v string) { b.Constraint = v },
		func(b *Batch, v string) { b.JobName = v },
		func(b *Batch, v string) { b.Output = v },
		func(b *Batch, v string) { b.Chdir = v },
	}
	written := 0
	for i, v := range inject {
		for j, f := range set {
			b := Batch{Nodes: 1, TasksPerNode: 1, TimeMinutes: 1, Command: []string{"true"}}
			f(&b, v)
			s, err := b.Script()
			if err != nil {
				assert.ErrorContains(t, err, "line")
				continue
			}
			written++
			path := filepath.Join(dir, "job.sbatch")
			require.NoError(t, os.WriteFile(path, []byte(s), 0o755))
			out, err := exec.Command(bash, path).CombinedOutput()
			require.NoError(t, err, "value %d field %d:\n%s\n%s", i, j, s, out)
			_, statErr := os.Stat(marker)
			require.True(t, os.IsNotExist(statErr), "value %q in field %d ran a command; script:\n%s", v, j, s)
		}
	}
	assert.Positive(t, written, "values without a line break are written, quoted")
}

// TestSbatchQuote: values Slurm reads from a #SBATCH line: plain names stay
// bare, anything else is double-quoted with \ escapes (Slurm's own rules for
// #SBATCH arguments), and line breaks are refused.
func TestSbatchQuote(t *testing.T) {
	for in, want := range map[string]string{
		"gpu":          "gpu",
		"a100&ib":      `"a100&ib"`,
		"/r/a b/x.out": `"/r/a b/x.out"`,
		`say "hi" \ #`: `"say \"hi\" \\ #"`,
	} {
		got, err := sbatchQuote(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"a\nb", "a\rb", "a\x00b"} {
		_, err := sbatchQuote(in)
		assert.Error(t, err, "%q", in)
	}
}
