package rendezvous

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// storeClient speaks the store protocol as the engine's gloo_store.cpp does.
type storeClient struct {
	t  *testing.T
	nc net.Conn
	sc *bufio.Scanner
	id int64
}

func dialStore(t *testing.T, addr string) *storeClient {
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &storeClient{t: t, nc: nc, sc: bufio.NewScanner(nc)}
}

func (c *storeClient) do(req map[string]any) map[string]any {
	c.id++
	req["id"] = c.id
	b, _ := json.Marshal(req)
	_, err := c.nc.Write(append(b, '\n'))
	require.NoError(c.t, err)
	if !c.sc.Scan() {
		return nil // the runner closed the connection
	}
	var r map[string]any
	require.NoError(c.t, json.Unmarshal(c.sc.Bytes(), &r))
	return r
}

// TestStoreRefusesForeignClients: Gloo's store is the rendezvous, so a client
// without the trial's token cannot add a key (issue 21, defect 3), and a
// request before a hello ends the connection.
func TestStoreRefusesForeignClients(t *testing.T) {
	s, _ := listen(t, 2)
	foreign := dialStore(t, s.Addr())
	r := foreign.do(map[string]any{"type": "hello", "token": "guess", "rank": 0, "role": RoleStore})
	assert.Equal(t, TypeRefused, r["type"])
	assert.Nil(t, foreign.do(map[string]any{"type": "store", "op": "add", "key": "k", "delta": 1}), "the connection is closed")

	direct := dialStore(t, s.Addr())
	assert.Equal(t, TypeRefused, direct.do(map[string]any{"type": "store", "op": "add", "key": "k", "delta": 1})["type"])

	rank := dialStore(t, s.Addr())
	require.Equal(t, TypeOK, rank.do(map[string]any{"type": "hello", "token": "secret", "rank": 1, "role": RoleStore})["type"])
	assert.Equal(t, 0.0, rank.do(map[string]any{"type": "store", "op": "num_keys"})["count"], "nobody added a key")
}

// TestStoreOperations: the operations c10d's Store needs, with TCPStore's
// semantics.
func TestStoreOperations(t *testing.T) {
	s, _ := listen(t, 2)
	c := dialStore(t, s.Addr())
	require.Equal(t, TypeOK, c.do(map[string]any{"type": "hello", "token": "secret", "rank": 0, "role": RoleStore})["type"])
	op := func(req map[string]any) map[string]any {
		req["type"] = "store"
		r := c.do(req)
		require.Equal(t, "value", r["type"], "%v", r)
		return r
	}
	assert.Equal(t, false, op(map[string]any{"op": "check", "keys": []string{"a"}})["found"])
	op(map[string]any{"op": "set", "key": "a", "data": "00ff"})
	assert.Equal(t, true, op(map[string]any{"op": "check", "keys": []string{"a"}})["found"])
	assert.Equal(t, "00ff", op(map[string]any{"op": "get", "key": "a"})["data"])
	assert.Equal(t, 3.0, op(map[string]any{"op": "add", "key": "n", "delta": 3})["count"])
	assert.Equal(t, 1.0, op(map[string]any{"op": "add", "key": "n", "delta": -2})["count"])
	assert.Equal(t, "31", op(map[string]any{"op": "get", "key": "n"})["data"], "a counter is its decimal text")
	assert.Equal(t, "0a", op(map[string]any{"op": "compare_set", "key": "c", "data": "", "desired": "0a"})["data"])
	assert.Equal(t, "0a", op(map[string]any{"op": "compare_set", "key": "c", "data": "0b", "desired": "0c"})["data"])
	assert.Equal(t, "0c", op(map[string]any{"op": "compare_set", "key": "c", "data": "0a", "desired": "0c"})["data"])
	assert.Equal(t, 3.0, op(map[string]any{"op": "num_keys"})["count"])
	assert.Equal(t, true, op(map[string]any{"op": "delete", "key": "a"})["found"])
	assert.Equal(t, false, op(map[string]any{"op": "delete", "key": "a"})["found"])
	assert.Equal(t, TypeRefused, c.do(map[string]any{"type": "store", "op": "set", "key": "x", "data": "zz"})["type"])
}

// TestWelcomeNamesTheStore: a Gloo world's welcome points its store at the
// rendezvous, with the trial's token; other worlds get no store.
func TestWelcomeNamesTheStore(t *testing.T) {
	welcomes := []Welcome{{Config: engine.Config{Dist: engine.DistConfig{Backend: "gloo", WorldSize: 2}}, Ranks: 2},
		{Config: engine.Config{Dist: engine.DistConfig{Backend: "gloo", Rank: 1, WorldSize: 2}}, Ranks: 2}}
	s, err := Listen("127.0.0.1:0", "secret", welcomes, nil)
	require.NoError(t, err)
	defer s.Close()
	s.ServeStore("10.1.2.3:4567")
	w := s.welcome(1)
	assert.Equal(t, "10.1.2.3", w.Config.Dist.StoreAddr)
	assert.Equal(t, 4567, w.Config.Dist.StorePort)
	assert.Equal(t, "secret", w.Config.Dist.StoreToken)
	assert.Empty(t, welcomes[1].Config.Dist.StoreToken, "the runner's copy is unchanged")
}
