package engine

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoaderCacheCMake runs native/cmake/loader_cache_test.cmake: the build's
// rule for which directories stay off the engine's RUNPATH (a file the loader
// finds through its cache, through any link to it; not a copy elsewhere).
func TestLoaderCacheCMake(t *testing.T) {
	cmake, err := exec.LookPath("cmake")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and no cmake: the engine's build needs it")
		}
		t.Skip("no cmake")
	}
	out, err := exec.Command(cmake, "-DTMP="+t.TempDir(), "-P", "native/cmake/loader_cache_test.cmake").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "ok: ")
}
