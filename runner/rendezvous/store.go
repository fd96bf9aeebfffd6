package rendezvous

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"

	"github.com/casestudy/casestudy/engine"
)

// RoleStore is the hello role of Gloo's store connections (the engine's
// gloo_store.cpp): the rendezvous is the key-value store the ranks' Gloo
// meshes through, so no rank serves an unauthenticated c10d TCPStore. A
// store connection presents the trial's token and a rank in range like a
// rank does; a rank may open several. Its requests (type "store") are
// answered at once; the client polls check to wait for keys.
const RoleStore = "store"

// storeMsg is one request or reply of a store connection. Values travel as
// hex (Gloo's are binary).
type storeMsg struct {
	Type    string   `json:"type"` // request: store; reply: value or refused
	ID      int64    `json:"id"`
	Op      string   `json:"op,omitempty"` // set | get | add | check | delete | num_keys | compare_set
	Key     string   `json:"key,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Data    string   `json:"data,omitempty"`
	Desired string   `json:"desired,omitempty"`
	Delta   int64    `json:"delta,omitempty"`
	Count   int64    `json:"count"`
	Found   bool     `json:"found"`
	Message string   `json:"message,omitempty"`
}

// ServeStore makes the rendezvous Gloo's store: every welcome of a Gloo
// world names addr (host:port, as the ranks reach the rendezvous) and the
// trial's token as its store. Call it before the ranks start.
func (s *Server) ServeStore(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeAddr = addr
}

// welcome is rank's welcome, with the store filled in for a Gloo world.
func (s *Server) welcome(rank int) Welcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.welcomes[rank]
	if b := w.Config.Dist.Backend; s.storeAddr != "" && (b == "gloo" || b == engine.BackendStaged) {
		host, port, _ := splitHostPort(s.storeAddr)
		w.Config.Dist.StoreAddr, w.Config.Dist.StorePort, w.Config.Dist.StoreToken = host, port, s.token
	}
	return w
}

// serveStore answers an authenticated store connection until it closes.
func (s *Server) serveStore(c *conn, br *bufio.Reader, rank int) {
	for {
		line, err := readLine(br, maxLine)
		if err != nil {
			return
		}
		var req storeMsg
		if err := json.Unmarshal(line, &req); err != nil || req.Type != "store" {
			s.logf("rendezvous: a store connection of rank %d sent a bad request", rank)
			return
		}
		c.sendJSON(s.storeOp(req))
	}
}

// storeOp runs one request on the store's keys, as c10d's TCPStore does.
func (s *Server) storeOp(req storeMsg) storeMsg {
	r := storeMsg{Type: "value", ID: req.ID}
	bad := func(why string) storeMsg { return storeMsg{Type: TypeRefused, ID: req.ID, Message: why} }
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.Op {
	case "set":
		v, err := hex.DecodeString(req.Data)
		if err != nil {
			return bad("set: data is not hex")
		}
		s.store[req.Key] = v
	case "get":
		v, ok := s.store[req.Key]
		r.Found, r.Data = ok, hex.EncodeToString(v)
	case "add":
		n := int64(0)
		if v, ok := s.store[req.Key]; ok {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return bad("add: " + req.Key + " holds no integer")
			}
		}
		n += req.Delta
		s.store[req.Key] = []byte(strconv.FormatInt(n, 10))
		r.Count = n
	case "check":
		r.Found = true
		for _, k := range req.Keys {
			if _, ok := s.store[k]; !ok {
				r.Found = false
			}
		}
	case "delete":
		_, r.Found = s.store[req.Key]
		delete(s.store, req.Key)
	case "num_keys":
		r.Count = int64(len(s.store))
	case "compare_set":
		expected, err1 := hex.DecodeString(req.Data)
		desired, err2 := hex.DecodeString(req.Desired)
		if err1 != nil || err2 != nil {
			return bad("compare_set: data is not hex")
		}
		cur, ok := s.store[req.Key]
		switch {
		case !ok && len(expected) == 0:
			s.store[req.Key], cur = desired, desired
		case !ok:
			cur = expected
		case string(cur) == string(expected):
			s.store[req.Key], cur = desired, desired
		}
		r.Data = hex.EncodeToString(cur)
	default:
		return bad("unknown store request " + strconv.Quote(req.Op))
	}
	return r
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}
