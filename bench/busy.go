package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// busy runs n threads of floating-point work, each on an OS thread of its
// own, as a rank's compute threads keep the cores busy during its backward,
// until the returned stop is called (it waits for them to end).
func busy(n int) (stop func()) {
	if n <= 0 {
		return func() {}
	}
	if runtime.GOMAXPROCS(0) < n+1 { // the busy threads and this one
		runtime.GOMAXPROCS(n + 1)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	sink := make([]float64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			x := 1.0
			for !done.Load() {
				for range 1 << 14 {
					x = x*1.0000001 + 1e-9
				}
			}
			sink[i] = x
		}()
	}
	return func() {
		done.Store(true)
		wg.Wait()
	}
}
