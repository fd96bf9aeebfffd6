package main

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// TestOverridesOf: the flags given make the overrides of a new run; a
// resumed run applies its recorded ones, and refuses flags that contradict
// them.
func TestOverridesOf(t *testing.T) {
	cmd := func(args ...string) *cobra.Command {
		c := &cobra.Command{}
		addOverrideFlags(c.Flags())
		require.NoError(t, c.Flags().Parse(args))
		return c
	}
	got, err := overridesOf(cmd("--repeats", "auto", "--steps", "30"), nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"repeats": "auto", "steps": "30"}, got)

	prev := &store.Run{Dir: "results/x/run", Manifest: store.Manifest{Overrides: map[string]string{"repeats": "5"}}}
	got, err = overridesOf(cmd(), prev)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"repeats": "5"}, got, "resume applies the recorded overrides")
	got, err = overridesOf(cmd("--repeats", "5"), prev)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"repeats": "5"}, got)

	_, err = overridesOf(cmd("--repeats", "3"), prev)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	assert.Contains(t, err.Error(), "--repeats 3: results/x/run was started with --repeats 5")
}
