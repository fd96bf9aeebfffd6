package runner

import "slices"

// maxStepsPerCall bounds one engine call (cs_steps): the device is waited for
// once a call, so the host issues each step while the device finishes the one
// before, as a training loop that logs every few steps does; the first step of
// a call starts on an idle device. 20 keeps a usual measured window in one
// call and the runner's progress a call behind at most.
const maxStepsPerCall = 20

// stepCalls splits steps [0, total) into engine calls: the first step alone
// (its end is the first-step mark), the warm-up steps, then the measured steps
// in calls of at most maxStepsPerCall. A call also ends before each step in
// breaks (a fault due there), so that the steps before it are reported.
func stepCalls(warmup, total int, breaks []int) []int {
	cuts := []int{1, warmup}
	for at := warmup; at < total; at += maxStepsPerCall {
		cuts = append(cuts, at)
	}
	cuts = append(cuts, breaks...)
	cuts = append(cuts, total)
	slices.Sort(cuts)
	var calls []int
	prev := 0
	for _, c := range cuts {
		if c > prev && c <= total {
			calls = append(calls, c-prev)
			prev = c
		}
	}
	return calls
}

// measuredCalls splits the measured steps [from, to) into engine calls of at
// most maxStepsPerCall, ending a call before each step in breaks as
// stepCalls does. from is where the warm-up ended, which a warm-up floor
// (Welcome.WarmupSeconds) may have moved past workload.warmup_steps.
func measuredCalls(from, to int, breaks []int) []int {
	var cuts []int
	for at := from + maxStepsPerCall; at < to; at += maxStepsPerCall {
		cuts = append(cuts, at)
	}
	for _, b := range breaks {
		if b > from && b < to {
			cuts = append(cuts, b)
		}
	}
	cuts = append(cuts, to)
	slices.Sort(cuts)
	var calls []int
	prev := from
	for _, c := range cuts {
		if c > prev {
			calls = append(calls, c-prev)
			prev = c
		}
	}
	return calls
}
