package binding

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
)

// buildFake compiles testdata/fakeabi.c into a shared library with the given
// extra compiler flags and returns its path. The fake tests the binding only.
func buildFake(t *testing.T, name string, flags ...string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-shared", "-fPIC", "-Wall", "-Werror", "-I", filepath.Join("..", "native", "include"),
		"-o", out, filepath.Join("testdata", "fakeabi.c"), "-lpthread"}, flags...)
	cmd := exec.Command(cc, args...)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "compiling the fake library: %s", msg)
	return out
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		description string
		path        func(t *testing.T) string
		is          error
		contains    []string
	}{
		{
			description: "wrong ABI version names both versions and says to rebuild",
			path:        func(t *testing.T) string { return buildFake(t, "abi999.so", "-DFAKE_ABI=999") },
			is:          engine.ErrABIMismatch,
			contains:    []string{"ABI version 999", fmt.Sprintf("needs %d", ABIVersion), "make engine"},
		},
		{
			description: "missing file says where and how to build",
			path:        func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope", engine.LibraryName) },
			is:          engine.ErrNoLibrary,
			contains:    []string{"nope/" + engine.LibraryName, "not found", "make engine"},
		},
		{
			description: "a library without cs_step names the symbol",
			path:        func(t *testing.T) string { return buildFake(t, "nostep.so", "-DOMIT_STEP") },
			contains:    []string{"missing symbols [cs_step]", "make engine"},
		},
		{
			description: "a file that is not a shared library gives dlopen's text",
			path: func(t *testing.T) string {
				p := filepath.Join(t.TempDir(), engine.LibraryName)
				require.NoError(t, os.WriteFile(p, []byte("not an ELF file"), 0o644))
				return p
			},
			contains: []string{engine.LibraryName, "make engine"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			lib, err := Load(tt.path(t))
			require.Error(t, err)
			assert.Nil(t, lib)
			var le *engine.LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, exitcode.Environment, exitcode.Of(err))
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			for _, s := range tt.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestFakeBinding(t *testing.T) {
	path := buildFake(t, "fake.so")
	lib, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, path, lib.Path())

	// A second Load of the same file is an independent reference.
	lib2, err := Load(path)
	require.NoError(t, err)
	require.NoError(t, lib2.Close())
	require.NoError(t, lib2.Close(), "second Close is a no-op")

	t.Run("answers of any length (the engine allocates them)", func(t *testing.T) {
		bi, err := lib.BuildInfo() // 3 MiB
		require.NoError(t, err)
		assert.Equal(t, "fake", bi.Torch)
		models, err := lib.Models()
		require.NoError(t, err)
		assert.Equal(t, []engine.FamilyPresets{{Family: "gpt", Presets: []string{"fake"}}}, models)

		e, err := lib.Create(engine.Config{Family: "gpt", Preset: "big-step", Device: "cpu"})
		require.NoError(t, err)
		m, err := e.Step() // metrics of 3 MiB: beyond any fixed buffer
		require.NoError(t, err)
		assert.Equal(t, 1, m.Step)
		require.NoError(t, e.Close())
	})
	t.Run("several steps a call", func(t *testing.T) {
		e, err := lib.Create(engine.Config{Family: "gpt", Preset: "fake", Device: "cpu"})
		require.NoError(t, err)
		ms, err := e.Steps(3)
		require.NoError(t, err)
		require.Len(t, ms, 3)
		assert.Equal(t, []int{1, 2, 3}, []int{ms[0].Step, ms[1].Step, ms[2].Step})
		_, err = e.Steps(0)
		assert.ErrorIs(t, err, engine.ErrConfig)
		require.NoError(t, e.Close())
	})
	t.Run("a failure without a message", func(t *testing.T) {
		_, err := lib.Describe(engine.Config{Family: "gpt", Preset: "nomsg"})
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, engine.StatusRuntime, ee.Status)
		assert.Equal(t, "(the engine gave no message)", ee.Msg)
	})
	t.Run("cs_destroy reports its teardown error", func(t *testing.T) {
		e, err := lib.Create(engine.Config{Family: "gpt", Preset: "teardown-fails", Device: "cpu"})
		require.NoError(t, err)
		err = e.Close()
		assert.ErrorIs(t, err, engine.ErrComm)
		assert.ErrorContains(t, err, "engine cs_destroy: communication error: teardown: the communicator did not close")
		require.NoError(t, e.Close(), "the engine is gone: a second Close does nothing")
		_, err = e.Step()
		assert.ErrorContains(t, err, "closed")
	})
	t.Run("status and message come through", func(t *testing.T) {
		_, err := lib.Describe(engine.Config{Family: "gpt", Preset: "bad"})
		require.Error(t, err)
		assert.ErrorIs(t, err, engine.ErrConfig)
		assert.NotErrorIs(t, err, engine.ErrRuntime)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, engine.StatusConfig, ee.Status)
		assert.Equal(t, "cs_describe", ee.Op)
		assert.Contains(t, ee.Msg, `unknown preset "bad"`)
		assert.Equal(t, exitcode.Input, exitcode.Of(err))

		_, err = lib.NCCLUniqueID()
		assert.ErrorIs(t, err, engine.ErrUnsupported)
		_, err = lib.BenchAllReduce([]byte(`{}`))
		assert.ErrorIs(t, err, engine.ErrUnsupported)
		_, err = lib.Create(engine.Config{Device: "cuda"})
		assert.ErrorIs(t, err, engine.ErrUnsupported)
	})
	t.Run("communication progress and deadline, off the engine thread", func(t *testing.T) {
		p, err := lib.CommProgress()
		require.NoError(t, err)
		assert.Equal(t, engine.CommProgress{Issued: 3, Completed: 2, LastOp: "all_reduce", Step: 1,
			PendingMS: 12.5, DeadlineMS: 60000}, p)
		assert.Equal(t, int64(1), p.Outstanding())
		ms, err := lib.SetCommTimeout(90000)
		require.NoError(t, err)
		assert.Equal(t, 90000, ms)
		_, err = lib.SetCommTimeout(0)
		assert.ErrorIs(t, err, engine.ErrConfig)
	})
	t.Run("describe decodes", func(t *testing.T) {
		d, err := lib.Describe(engine.Config{Family: "gpt", Preset: "x"})
		require.NoError(t, err)
		assert.Equal(t, int64(42), d.Params)
		assert.Equal(t, 252.0, d.FLOPsPerSample)
		assert.Equal(t, 1, d.Shapes["layers"])
	})
	t.Run("every engine call runs on the thread that created it", func(t *testing.T) {
		e, err := lib.Create(engine.Config{Family: "gpt", Device: "cpu"})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for range 4 { // calls from several goroutines, hence several threads
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					_, err := e.Step()
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		m, err := e.Step()
		require.NoError(t, err)
		assert.Equal(t, 41, m.Step)
		_, err = e.Info()
		require.NoError(t, err)

		_, err = e.Checksum()
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, engine.StatusRuntime, ee.Status, "an undefined status is a runtime error")
		assert.Contains(t, ee.Msg, "unknown status 42")

		require.NoError(t, e.Close())
		require.NoError(t, e.Close(), "second Close is a no-op")
		_, err = e.Step()
		assert.ErrorContains(t, err, "closed")
	})
	t.Run("library outlives its engines", func(t *testing.T) {
		e, err := lib.Create(engine.Config{Family: "gpt", Device: "cpu"})
		require.NoError(t, err)
		require.NoError(t, lib.Close())
		_, err = lib.BuildInfo()
		assert.ErrorContains(t, err, "closed")
		_, err = e.Step() // the engine still holds the library
		require.NoError(t, err)
		require.NoError(t, e.Close())
	})
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, engine.LibraryName)
	require.NoError(t, os.WriteFile(lib, nil, 0o644))
	missing := filepath.Join(dir, "missing.so")

	tests := []struct {
		description string
		explicit    string
		env         string
		want        string
		errContains []string
	}{
		{"the flag wins over the variable", lib, missing, lib, nil},
		{"the variable when no flag", "", lib, lib, nil},
		{"a missing flag path is an error, not a fallback", missing, lib, "", []string{missing, "--engine-lib", "make engine"}},
		{"a missing variable path is an error", "", missing, "", []string{missing, "$CASESTUDY_ENGINE_LIB", "make engine"}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			t.Setenv(engine.EnvLibrary, tt.env)
			got, err := engine.Discover(tt.explicit)
			if tt.errContains != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, engine.ErrNoLibrary)
				for _, s := range tt.errContains {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("nothing found lists every place looked", func(t *testing.T) {
		t.Setenv(engine.EnvLibrary, "")
		t.Chdir(t.TempDir())
		_, err := engine.Discover("")
		require.Error(t, err)
		assert.True(t, errors.Is(err, engine.ErrNoLibrary))
		exe, _ := os.Executable()
		for _, s := range []string{filepath.Dir(exe), filepath.Join("build", "engine", engine.LibraryName), "make engine"} {
			assert.Contains(t, err.Error(), s)
		}
		assert.Equal(t, 1, strings.Count(err.Error(), "make engine"))
	})
	t.Run("the build folder of the working directory", func(t *testing.T) {
		t.Setenv(engine.EnvLibrary, "")
		wd := t.TempDir()
		want := filepath.Join(wd, "build", "engine", engine.LibraryName)
		require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
		require.NoError(t, os.WriteFile(want, nil, 0o644))
		t.Chdir(wd)
		got, err := engine.Discover("")
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
}

// TestProbe: a missing library is a load error (exit 3); the real one gives
// its path and build facts.
func TestProbe(t *testing.T) {
	_, _, err := Probe(filepath.Join(t.TempDir(), "none.so"))
	var le *engine.LoadError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))

	lib := realLibrary(t)
	path, bi, err := Probe(lib.Path())
	require.NoError(t, err)
	assert.Equal(t, lib.Path(), path)
	assert.Equal(t, ABIVersion, bi.ABI)
	assert.NotEmpty(t, bi.Torch)
	// The loaded copies, by path (loaded_libs.h): torch's own library at least.
	found := false
	for name, p := range bi.Libraries {
		if strings.HasPrefix(name, "libtorch_cpu.so") {
			found = true
			_, err := os.Stat(p)
			assert.NoError(t, err, "%s: %s", name, p)
		}
	}
	assert.True(t, found, "no libtorch_cpu among the loaded libraries: %v", bi.Libraries)
}
