package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LibraryName is the file name of the engine library.
const LibraryName = "libcasestudy_engine.so"

// EnvLibrary names the environment variable that points at the library.
const EnvLibrary = "CASESTUDY_ENGINE_LIB"

// builtLibrary is the library `make` built alongside this binary, recorded at
// link time by the Makefile (-ldflags -X
// github.com/casestudy/casestudy/engine.builtLibrary=PATH); "" for a plain
// go build.
var builtLibrary = ""

// Discover finds the engine library. In order: explicit (the --engine-lib
// flag), $CASESTUDY_ENGINE_LIB, next to the executable (LibraryName or
// ../lib/LibraryName, as `make install` lays them out), the library `make`
// built with this binary (builtLibrary), then build/engine/LibraryName under
// the working directory or, inside a source checkout, under the module root.
// An explicit path or the variable that names a missing file is an error, not
// a reason to look elsewhere. The error lists where it looked and how to build
// the library.
func Discover(explicit string) (string, error) {
	if explicit != "" {
		return existing(explicit, "--engine-lib")
	}
	if env := os.Getenv(EnvLibrary); env != "" {
		return existing(env, "$"+EnvLibrary)
	}
	var looked []string
	for _, p := range candidates() {
		if fileExists(p) {
			return p, nil
		}
		looked = append(looked, p)
	}
	return "", &LoadError{
		Err: fmt.Errorf("%w (--engine-lib and $%s not set; looked in %s)",
			ErrNoLibrary, EnvLibrary, strings.Join(looked, ", ")),
		Hint: BuildHint,
	}
}

func existing(path, source string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if !fileExists(abs) {
		return "", &LoadError{Path: abs, Err: fmt.Errorf("%w (named by %s)", ErrNoLibrary, source), Hint: BuildHint}
	}
	return abs, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// candidates are the places Discover looks when nothing names the library.
func candidates() []string {
	var out []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		out = append(out, filepath.Join(dir, LibraryName), filepath.Join(dir, "..", "lib", LibraryName))
	}
	if builtLibrary != "" {
		out = append(out, builtLibrary)
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, filepath.Join(wd, "build", "engine", LibraryName))
		// Inside a source checkout (go test runs in the package folder), the
		// module root's build folder.
		for dir := wd; ; dir = filepath.Dir(dir) {
			if fileExists(filepath.Join(dir, "go.mod")) {
				if dir != wd {
					out = append(out, filepath.Join(dir, "build", "engine", LibraryName))
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return out
}
