package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStepCalls(t *testing.T) {
	cases := []struct {
		name          string
		warmup, total int
		breaks        []int
		want          []int
	}{
		{"first step, warm-up, measured", 5, 25, nil, []int{1, 4, 20}},
		{"long measured window in calls of 20", 2, 50, nil, []int{1, 1, 20, 20, 8}},
		{"no warm-up", 0, 3, nil, []int{1, 2}},
		{"one step", 1, 1, nil, []int{1}},
		{"nothing", 0, 0, nil, nil},
		{"a fault starts a call", 5, 25, []int{7}, []int{1, 4, 2, 18}},
		{"faults at 0, on a cut and past the end change nothing", 5, 25, []int{0, 5, 40}, []int{1, 4, 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := stepCalls(c.warmup, c.total, c.breaks)
			assert.Equal(t, c.want, got)
			sum := 0
			for _, n := range got {
				assert.LessOrEqual(t, n, maxStepsPerCall)
				sum += n
			}
			assert.Equal(t, c.total, sum)
		})
	}
}
