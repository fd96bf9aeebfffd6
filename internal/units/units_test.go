package units

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"},
		{25 << 20, "25.0 MiB"}, {41015808819, "38.2 GiB"}, {140 << 30, "140.0 GiB"},
		{3 << 50, "3.0 PiB"}, {5 << 60, "5120.0 PiB"}, {-2048, "-2.0 KiB"},
	} {
		assert.Equal(t, tt.want, Bytes(tt.in), "%d", tt.in)
	}
}
