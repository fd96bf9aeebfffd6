package rendezvous

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Event is something a rank told the runner (or a refused join), in arrival order.
type Event struct {
	At  time.Time
	Msg Message // Type is one of heartbeat, info, step, checksum, done, error, hello, set, barrier, refused, lost
}

// TypeLost is the event of a joined rank whose connection closed before done
// or error (it died or was killed).
const TypeLost = "lost"

// Server is one trial launch's rendezvous.
type Server struct {
	ln       net.Listener
	token    string
	welcomes []Welcome
	logf     func(format string, args ...any)
	events   chan Event
	quit     chan struct{}
	wg       sync.WaitGroup

	mu        sync.Mutex
	pending   []net.Conn // connected, not yet authenticated; oldest first
	noise     int        // refused or dropped connections so far (strangers: noisy.go)
	stores    []net.Conn // authenticated store connections
	joined    map[int]net.Conn
	kv        map[string]string
	store     map[string][]byte // Gloo's store (store.go)
	storeAddr string
	waiting   map[string][]func(string)
	since     map[string]time.Time // when the last rank began waiting for a key
	barriers  map[string][]func()
	closed    bool
}

// NewToken returns a random token for one trial launch.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Listen starts a rendezvous on addr ("127.0.0.1:0" picks a free port) for
// len(welcomes) ranks that must present token. logf receives refused joins.
func Listen(addr, token string, welcomes []Welcome, logf func(string, ...any)) (*Server, error) {
	if token == "" {
		return nil, fmt.Errorf("rendezvous: empty token")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: listening on %s: %w", addr, err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Server{ln: ln, token: token, welcomes: welcomes, logf: logf,
		events: make(chan Event, 1024), quit: make(chan struct{}),
		joined: map[int]net.Conn{}, kv: map[string]string{}, store: map[string][]byte{},
		waiting: map[string][]func(string){}, since: map[string]time.Time{}, barriers: map[string][]func(){}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is host:port for the ranks.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Events delivers what the ranks report. The runner must keep reading until Close.
func (s *Server) Events() <-chan Event { return s.events }

// Close stops accepting, closes every connection and waits for the handlers.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	for _, c := range s.joined {
		c.Close()
	}
	for _, c := range s.pending {
		c.Close()
	}
	for _, c := range s.stores {
		c.Close()
	}
	s.summarizeNoise()
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *Server) emit(m Message) {
	select {
	case s.events <- Event{At: time.Now(), Msg: m}:
	case <-s.quit:
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.admit(c)
		s.wg.Add(1)
		go s.serve(c)
	}
}

// admit counts c as unauthenticated until its hello is answered; past
// maxUnauthenticated the oldest such connection is dropped, so a flood of
// idle connections costs a bounded amount and cannot keep a rank (which says
// hello at once) from joining.
func (s *Server) admit(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) >= maxUnauthenticated {
		i := evictable(s.pending, hasSpoken)
		oldest := s.pending[i]
		s.pending = append(s.pending[:i], s.pending[i+1:]...)
		oldest.Close()
		s.noisyf("rendezvous: more than %d connections without a hello; dropped the oldest silent one, from %s", maxUnauthenticated, oldest.RemoteAddr())
	}
	s.pending = append(s.pending, c)
}

// settle stops counting c as unauthenticated.
func (s *Server) settle(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.pending {
		if p == c {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return
		}
	}
}

// track keeps an authenticated store connection to close with the server
// (false: the server is closed already).
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.stores = append(s.stores, c)
	return true
}

// unauthenticated is how many connections have not said hello yet.
func (s *Server) unauthenticated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// conn serialises writes to one rank (replies come from several goroutines).
type conn struct {
	net.Conn
	mu sync.Mutex
}

func (c *conn) send(m Message) { c.sendJSON(m) }

func (c *conn) sendJSON(m any) {
	b, _ := json.Marshal(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(append(b, '\n'))
}

// refuse answers a join it turns down. The event speaks for no rank (Rank
// -1): whoever sent it is not known to be one, and must not look alive.
func (s *Server) refuse(c *conn, hello Message, why string) {
	s.mu.Lock()
	s.noisyf("rendezvous: refused a join from %s (claimed rank %d): %s", c.RemoteAddr(), hello.Rank, why)
	s.mu.Unlock()
	s.emit(Message{Type: TypeRefused, Rank: -1, Message: fmt.Sprintf("%s (claimed rank %d, from %s)", why, hello.Rank, c.RemoteAddr())})
	c.send(Message{Type: TypeRefused, ID: hello.ID, Rank: hello.Rank, Message: why})
}

func (s *Server) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	defer s.settle(nc)
	c := &conn{Conn: nc}
	br := bufio.NewReaderSize(nc, maxHelloLine)

	// The first line must be a hello with the right token, within 10 s, and
	// short: nothing larger is read from a connection before it is known.
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := readLine(br, maxHelloLine)
	if err != nil {
		if errors.Is(err, errLineTooLong) {
			s.logf("rendezvous: dropped a connection from %s: its first line is longer than a hello (%d bytes)", nc.RemoteAddr(), maxHelloLine)
		}
		return
	}
	var hello Message
	if err := json.Unmarshal(line, &hello); err != nil || hello.Type != TypeHello {
		s.refuse(c, Message{Rank: -1}, "the first message must be a hello")
		return
	}
	if subtle.ConstantTimeCompare([]byte(hello.Token), []byte(s.token)) != 1 {
		s.refuse(c, hello, "wrong token")
		return
	}
	rank := hello.Rank
	if rank < 0 || rank >= len(s.welcomes) {
		s.refuse(c, hello, fmt.Sprintf("rank %d is outside 0..%d", rank, len(s.welcomes)-1))
		return
	}
	if hello.Role == RoleStore {
		_ = nc.SetReadDeadline(time.Time{})
		s.settle(nc)
		if !s.track(nc) {
			return
		}
		c.send(Message{Type: TypeOK, ID: hello.ID, Rank: rank})
		s.serveStore(c, br, rank)
		return
	}
	s.mu.Lock()
	_, dup := s.joined[rank]
	if !dup && !s.closed {
		s.joined[rank] = nc
	}
	closed := s.closed
	s.mu.Unlock()
	if dup || closed {
		s.refuse(c, hello, fmt.Sprintf("rank %d already joined", rank))
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	s.settle(nc)
	w := s.welcome(rank)
	c.send(Message{Type: TypeWelcome, ID: hello.ID, Rank: rank, Welcome: &w})
	s.emit(Message{Type: TypeHello, Rank: rank})

	finished := false
	for {
		line, err := readLine(br, maxLine)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				s.logf("rendezvous: rank %d sent a line longer than %d bytes; closing its connection", rank, maxLine)
			}
			break
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			s.logf("rendezvous: rank %d sent a bad line: %v", rank, err)
			continue
		}
		m.Rank = rank
		switch m.Type {
		case TypeSet:
			s.set(m.Key, m.Value)
			c.send(Message{Type: TypeOK, ID: m.ID})
		case TypeGet:
			id, key := m.ID, m.Key
			s.get(key, func(v string) { c.send(Message{Type: TypeValue, ID: id, Key: key, Value: v}) })
		case TypeBarrier:
			id := m.ID
			s.emit(m)
			s.barrier(m.Name, func() { c.send(Message{Type: TypeOK, ID: id}) })
		case TypeDone, TypeError:
			finished = true
			s.emit(m)
			c.send(Message{Type: TypeOK, ID: m.ID})
		case TypeSignal: // emitted before the reply: the rank ends only after the runner has it
			s.emit(m)
			c.send(Message{Type: TypeOK, ID: m.ID})
		case TypeHeartbeat: // dropped when nobody reads (a launch prepared ahead waits): the next one comes
			select {
			case s.events <- Event{At: time.Now(), Msg: m}:
			default:
			}
		case TypeInfo, TypeStep, TypeChecksum, TypeProfile, TypeMark:
			s.emit(m)
		default:
			s.logf("rendezvous: rank %d sent an unknown message %q", rank, m.Type)
		}
	}
	if !finished {
		s.emit(Message{Type: TypeLost, Rank: rank})
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its newline) of at most limit bytes; a
// longer one is errLineTooLong, read no further.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// Set stores key=value as a rank's set would, releasing the ranks waiting for
// it (the runner opens a launch's KeyGo gate this way).
func (s *Server) Set(key, value string) { s.set(key, value) }

// Waiting is how many ranks wait for key (not yet set) and when the last of
// them began to.
func (s *Server) Waiting(key string) (int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting[key]), s.since[key]
}

func (s *Server) set(key, value string) {
	s.mu.Lock()
	s.kv[key] = value
	waiters := s.waiting[key]
	delete(s.waiting, key)
	s.mu.Unlock()
	for _, f := range waiters {
		f(value)
	}
}

func (s *Server) get(key string, reply func(string)) {
	s.mu.Lock()
	v, ok := s.kv[key]
	if !ok {
		s.waiting[key] = append(s.waiting[key], reply)
		s.since[key] = time.Now()
	}
	s.mu.Unlock()
	if ok {
		reply(v)
	}
}

// barrier releases everyone once all ranks of the trial arrived at name.
func (s *Server) barrier(name string, release func()) {
	s.mu.Lock()
	s.barriers[name] = append(s.barriers[name], release)
	var all []func()
	if len(s.barriers[name]) == len(s.welcomes) {
		all = s.barriers[name]
		delete(s.barriers, name)
	}
	s.mu.Unlock()
	for _, f := range all {
		f()
	}
}
