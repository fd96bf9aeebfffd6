package provenance

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRelevantEnvLeavesTheTokenOut (audit B-11 note): a rendezvous token the
// parent environment holds is never recorded in the manifest.
func TestRelevantEnvLeavesTheTokenOut(t *testing.T) {
	env := RelevantEnv([]string{"CASESTUDY_TOKEN=s3cret", "CASESTUDY_RANK=7", "NCCL_DEBUG=WARN"})
	assert.NotContains(t, env, "CASESTUDY_TOKEN")
	assert.Equal(t, "WARN", env["NCCL_DEBUG"])
}
