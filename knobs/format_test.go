package knobs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJoin(t *testing.T) {
	v := map[string]string{"precision": "bf16", "ddp.bucket_mb": "25", "nccl.algo": "ring"}
	for _, tc := range []struct {
		name  string
		names []string
		sep   string
		want  string
	}{
		{"name order", nil, " ", "ddp.bucket_mb=25 nccl.algo=ring precision=bf16"},
		{"given order", []string{"precision", "nccl.algo"}, ", ", "precision=bf16, nccl.algo=ring"},
		{"a name without a value", []string{"missing"}, ", ", "missing="},
		{"no names", []string{}, ", ", ""},
	} {
		assert.Equal(t, tc.want, Join(v, tc.names, tc.sep), tc.name)
	}
}
