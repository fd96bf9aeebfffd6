package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEstimateModelStates: BERT-large-sized AdamW (335M parameters) on 8
// ranks: DDP keeps 16 bytes a parameter on every rank; ZeRO-1 divides the 8
// bytes of moments by 8, ZeRO-2 the 4 bytes of gradients too; SGD keeps one
// buffer; a pipeline stage holds its share of the parameters.
func TestEstimateModelStates(t *testing.T) {
	const p = 335_000_000
	tests := []struct {
		name                 string
		family               string
		stages, dp, zero     int
		weights, grads, opts int64
	}{
		{"ddp adamw", "bert", 1, 8, 0, 4 * p, 4 * p, 8 * p},
		{"zero-1 adamw", "bert", 1, 8, 1, 4 * p, 4 * p, p},
		{"zero-2 adamw", "bert", 1, 8, 2, 4 * p, p / 2, p},
		{"zero-1 sgd", "resnet50", 1, 4, 1, 4 * p, 4 * p, p},
		{"one rank: nothing to share", "gpt", 1, 1, 2, 4 * p, 4 * p, 8 * p},
		{"two stages", "gpt", 2, 4, 0, 2 * p, 2 * p, 4 * p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := EstimateModelStates(p, tt.family, tt.stages, tt.dp, tt.zero)
			assert.Equal(t, ModelStates{tt.weights, tt.grads, tt.opts}, m)
			assert.Equal(t, tt.weights+tt.grads+tt.opts, m.Total())
		})
	}
}
