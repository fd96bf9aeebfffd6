package rendezvous

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
)

// ErrRefused is returned by Dial when the runner refuses the join.
var ErrRefused = errors.New("rendezvous refused the join")

// ErrLost is returned by calls after the connection to the runner broke.
var ErrLost = errors.New("lost the connection to the runner")

// Client is a rank's side of the rendezvous. Its methods are safe to call from
// several goroutines (the heartbeat runs beside the training loop).
type Client struct {
	conn net.Conn
	Rank int

	wmu     sync.Mutex // serialises writes
	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan Message
	lost    chan struct{}
}

// Dial joins the rendezvous at addr as rank with token and returns the rank's
// Welcome.
func Dial(ctx context.Context, addr, token string, rank int) (*Client, *Welcome, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("rendezvous: %w", err)
	}
	c := &Client{conn: nc, Rank: rank, pending: map[int64]chan Message{}, lost: make(chan struct{})}
	go c.read()
	reply, err := c.request(ctx, Message{Type: TypeHello, Token: token, Rank: rank})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	if reply.Type == TypeRefused || reply.Welcome == nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%w: %s", ErrRefused, reply.Message)
	}
	return c, reply.Welcome, nil
}

func (c *Client) read() {
	defer func() {
		c.mu.Lock()
		close(c.lost)
		c.mu.Unlock()
	}()
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var m Message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// Lost is closed when the connection to the runner is gone: the runner died
// or killed the trial, and the rank should exit.
func (c *Client) Lost() <-chan struct{} { return c.lost }

func (c *Client) write(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %v", ErrLost, err)
	}
	return nil
}

// request sends m with a fresh ID and waits for the reply with that ID.
func (c *Client) request(ctx context.Context, m Message) (Message, error) {
	ch := make(chan Message, 1)
	c.mu.Lock()
	c.nextID++
	m.ID = c.nextID
	c.pending[m.ID] = ch
	c.mu.Unlock()
	if err := c.write(m); err != nil {
		return Message{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.lost:
		select { // the reply may have arrived just before the close
		case r := <-ch:
			return r, nil
		default:
			return Message{}, ErrLost
		}
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Set stores key=value for the other ranks.
func (c *Client) Set(ctx context.Context, key, value string) error {
	_, err := c.request(ctx, Message{Type: TypeSet, Key: key, Value: value})
	return err
}

// Get waits until some rank set key and returns its value.
func (c *Client) Get(ctx context.Context, key string) (string, error) {
	r, err := c.request(ctx, Message{Type: TypeGet, Key: key})
	return r.Value, err
}

// Barrier returns once every rank of the trial arrived at the barrier name.
func (c *Client) Barrier(ctx context.Context, name string) error {
	_, err := c.request(ctx, Message{Type: TypeBarrier, Name: name})
	return err
}

// Heartbeat tells the runner the rank is alive; step is the last completed
// step, progress (nil before the engine is loaded) what its communicators
// issued and completed.
func (c *Client) Heartbeat(step int, progress *engine.CommProgress) error {
	return c.write(Message{Type: TypeHeartbeat, Step: step, Progress: progress})
}

// Mark reports a timeline mark: the phase that ends at it ended at at.
func (c *Client) Mark(name string, at time.Time) error {
	return c.write(Message{Type: TypeMark, Name: name, At: at.UnixNano()})
}

// Info reports the created engine's facts.
func (c *Client) Info(info engine.Info) error { return c.write(Message{Type: TypeInfo, Info: &info}) }

// Step reports one step's metrics.
func (c *Client) Step(m engine.StepMetrics, warmup bool) error {
	return c.write(Message{Type: TypeStep, Step: m.Step, Warmup: warmup, Metrics: &m})
}

// Checksum reports the parameter checksum after the last step.
func (c *Client) Checksum(sum engine.Checksum) error {
	return c.write(Message{Type: TypeChecksum, Checksum: &sum})
}

// Profile reports the profile taken after the measured steps.
func (c *Client) Profile(p *profile.Summary) error {
	return c.write(Message{Type: TypeProfile, Profile: p})
}

// Done reports a clean finish and waits until the runner has it.
func (c *Client) Done(ctx context.Context) error {
	_, err := c.request(ctx, Message{Type: TypeDone})
	return err
}

// Error reports why the rank stops (status failed, oom or unsupported) and
// waits until the runner has it.
func (c *Client) Error(ctx context.Context, status, message string) error {
	_, err := c.request(ctx, Message{Type: TypeError, Status: status, Message: message})
	return err
}

// Signal tells the runner the rank received sig and will end by it, and waits
// until the runner has it (so it arrives before any peer notices the end).
func (c *Client) Signal(ctx context.Context, sig string) error {
	_, err := c.request(ctx, Message{Type: TypeSignal, Signal: sig})
	return err
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
