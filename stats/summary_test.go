package stats

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDescribeOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want Describe
	}{
		{"empty", nil, Describe{}},
		{"one value has no spread", []float64{7}, Describe{Median: 7, P10: 7, P90: 7}},
		{"constant", []float64{5, 5, 5, 5}, Describe{Median: 5, P10: 5, P90: 5}},
		{"odd count", []float64{3, 1, 2}, Describe{Median: 2, P10: 1, P90: 3, CV: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DescribeOf(tc.xs)
			assert.InDelta(t, tc.want.Median, got.Median, 1e-9)
			assert.InDelta(t, tc.want.CV, got.CV, 1e-9)
			assert.GreaterOrEqual(t, got.P90, got.Median)
			assert.LessOrEqual(t, got.P10, got.Median)
		})
	}
}
