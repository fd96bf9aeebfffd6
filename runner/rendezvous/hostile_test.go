package rendezvous

import (
	"bytes"
	"encoding/json"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestJunkBeforeHelloCostsNoMemory: 30 connections that each send 15 MiB
// without a line break before any hello (issue 21, defect 8) do not grow
// the runner's memory: the hello is read with a small limit, and the
// connection is dropped once it is passed.
func TestJunkBeforeHelloCostsNoMemory(t *testing.T) {
	s, _ := listen(t, 2)
	before := heapInUse()
	junk := bytes.Repeat([]byte("x"), 15<<20)
	var wg sync.WaitGroup
	conns := make([]net.Conn, 30)
	for i := range conns {
		c, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			_, _ = c.Write(junk) // fails once the runner hangs up
		}()
	}
	wg.Wait()
	grown := int64(heapInUse()) - int64(before)
	for _, c := range conns {
		c.Close()
	}
	assert.Less(t, grown, int64(16<<20), "the runner's heap grew by %d MiB for 30 junk connections", grown>>20)

	c, _, err := Dial(ctx(t), s.Addr(), "secret", 0)
	require.NoError(t, err, "a rank still joins")
	c.Close()
}

// TestIdleConnectionsCannotLockRanksOut: unauthenticated connections are
// capped; past the cap the oldest is dropped, so a flood of idle connections
// neither grows without bound nor keeps a rank from joining.
func TestIdleConnectionsCannotLockRanksOut(t *testing.T) {
	s, _ := listen(t, 1)
	var idle []net.Conn
	for i := 0; i < maxUnauthenticated+20; i++ {
		c, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	require.Eventually(t, func() bool { return s.unauthenticated() <= maxUnauthenticated }, 5*time.Second, 5*time.Millisecond)
	c, _, err := Dial(ctx(t), s.Addr(), "secret", 0)
	require.NoError(t, err)
	c.Close()
}

// TestRefusedJoinIsNoRankEvent: a refused hello is reported without the rank
// it claimed, so nothing unauthenticated can look like a rank's sign of life
// (issue 21, defect 7).
func TestRefusedJoinIsNoRankEvent(t *testing.T) {
	s, logged := listen(t, 2)
	for i := 0; i < 3; i++ {
		nc, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		b, _ := json.Marshal(Message{Type: TypeHello, Token: "guess", Rank: 1})
		_, err = nc.Write(append(b, '\n'))
		require.NoError(t, err)
		var reply Message
		require.NoError(t, json.NewDecoder(nc).Decode(&reply))
		assert.Equal(t, TypeRefused, reply.Type)
		nc.Close()
		e := <-s.Events()
		assert.Equal(t, TypeRefused, e.Msg.Type)
		assert.Equal(t, -1, e.Msg.Rank, "a refused join speaks for no rank")
		assert.Contains(t, e.Msg.Message, "claimed rank 1")
	}
	assert.Len(t, *logged, 3)
}
