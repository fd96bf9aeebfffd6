package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiscoverBuiltLibrary: with nothing named, the library recorded at link
// time is found from any working directory; a recorded path that is gone is
// listed among the places looked at.
func TestDiscoverBuiltLibrary(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	lib := filepath.Join(t.TempDir(), LibraryName)
	require.NoError(t, os.WriteFile(lib, nil, 0o644))
	saved := builtLibrary
	t.Cleanup(func() { builtLibrary = saved })
	t.Chdir(t.TempDir())

	builtLibrary = lib
	got, err := Discover("")
	require.NoError(t, err)
	assert.Equal(t, lib, got)

	builtLibrary = filepath.Join(t.TempDir(), "gone", LibraryName)
	_, err = Discover("")
	require.ErrorIs(t, err, ErrNoLibrary)
	assert.Contains(t, err.Error(), builtLibrary)
}

// TestDiscoverOrder: --engine-lib, then the variable; either naming a missing
// file is an error rather than a reason to look elsewhere.
func TestDiscoverOrder(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.so"), filepath.Join(dir, "b.so")
	require.NoError(t, os.WriteFile(a, nil, 0o644))
	require.NoError(t, os.WriteFile(b, nil, 0o644))
	t.Setenv(EnvLibrary, b)
	got, err := Discover(a)
	require.NoError(t, err)
	assert.Equal(t, a, got)
	got, err = Discover("")
	require.NoError(t, err)
	assert.Equal(t, b, got)
	t.Setenv(EnvLibrary, filepath.Join(dir, "missing.so"))
	_, err = Discover("")
	assert.ErrorIs(t, err, ErrNoLibrary)
}
