package report

import (
	"maps"
	"slices"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// rankLibraries is what the run's GPU ranks loaded (cs_info's libraries and
// cudnn_runtime): the loaded cuDNN's version(s) and each library file by
// name, "libcudnn.so.9 /path/libcudnn.so.9", every distinct copy over every
// launch of every trial (two copies of one name: ranks that ran different
// files), sorted. The engine's build facts say what torch was built with;
// this is what ran (docs/perf.md, "Twenty-fourth session": the system's cuDNN
// in place of torch's made GPT-2 4.3% slower at one commit). Empty on the CPU and for
// records from before the libraries were recorded.
func rankLibraries(run *store.Run) (cudnn []string, libs []string) {
	versions, files := map[string]bool{}, map[string]bool{}
	for _, rk := range rankInfos(run) {
		if v := rk.Info.CuDNNRuntime; v != "" {
			versions[engine.CuDNNVersion(v)] = true
		}
		for name, path := range rk.Info.Libraries {
			files[name+" "+path] = true
		}
	}
	if len(versions) > 0 {
		cudnn = slices.Sorted(maps.Keys(versions))
	}
	if len(files) > 0 {
		libs = slices.Sorted(maps.Keys(files))
	}
	return cudnn, libs
}
