package rendezvous

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusalFloodIsSummarized (audit N13, R-9): 200 refused joins log
// noiseLines lines and one summary at Close, not 200 lines; a rank still
// joins.
func TestRefusalFloodIsSummarized(t *testing.T) {
	s, logged := listen(t, 1)
	for i := 0; i < 200; i++ {
		_, _, err := Dial(ctx(t), s.Addr(), "wrong", 0)
		require.True(t, errors.Is(err, ErrRefused), "%v", err)
	}
	c, _, err := Dial(ctx(t), s.Addr(), "secret", 0)
	require.NoError(t, err)
	c.Close()
	s.Close()
	lines := *logged
	assert.LessOrEqual(t, len(lines), noiseLines+1, strings.Join(lines, "\n"))
	require.NotEmpty(t, lines)
	assert.Contains(t, lines[len(lines)-1], "190 more refused or dropped connections were not shown")
}

// TestSilentStrangersAreEvictedFirst (audit N13, R-10): when too many
// connections wait without a hello, the one dropped is the oldest that has
// sent nothing: a connection whose hello waits unread (a rank's, or its
// Gloo store's, under a churn of strangers) is not pushed out.
func TestSilentStrangersAreEvictedFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var server []net.Conn
	dial := func(send string) {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		if send != "" {
			_, err = c.Write([]byte(send))
			require.NoError(t, err)
		}
		sc, err := ln.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { sc.Close() })
		server = append(server, sc)
	}
	dial(`{"type":"hello"}` + "\n") // the oldest: a rank whose hello is not read yet
	dial("")
	dial("")
	require.Eventually(t, func() bool { return hasSpoken(server[0]) }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, evictable(server, hasSpoken), "the oldest silent one")
	assert.False(t, hasSpoken(server[1]))
	assert.Equal(t, 0, evictable(server[:1], hasSpoken), "all spoke: the oldest")
}
