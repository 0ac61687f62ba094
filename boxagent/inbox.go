package boxagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// Inbox is the box's offload inbox: it owns the box CLI sessions and
// serves the ops of the contract's "Inbox" table on a unix socket, one
// JSON object per line.
type Inbox struct {
	cfg *Config

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	watchers map[chan []byte]struct{}
	envRuns  map[string]bool // repo keys whose environment step runs here
	// startMu serialises session starts, so the session count holds.
	startMu sync.Mutex

	pathOnce   sync.Once
	selfOnPATH bool

	// logSeen keeps, per repo key, the size and time of its session log
	// at the pane watcher's last read (under mu).
	logSeen map[string]string
}

// NewInbox returns an inbox for cfg; Serve runs it.
func NewInbox(cfg *Config) *Inbox {
	return &Inbox{cfg: cfg, changed: make(chan struct{}), watchers: map[chan []byte]struct{}{}, envRuns: map[string]bool{}, logSeen: map[string]string{}}
}

// Listen makes the inbox's socket: the directory 0700, the socket 0600,
// at any length of path.
// A socket another inbox answers on is refused; a stale one is replaced.
func (ib *Inbox) Listen() (net.Listener, error) {
	p := ib.cfg.SocketPath()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	if conn, err := unixsock.Dial(p); err == nil {
		conn.Close()
		return nil, fmt.Errorf("an inbox already listens on %s", p)
	}
	os.Remove(p)
	// A path longer than a socket address holds is bound through a short
	// name (internal/unixsock).
	lis, err := unixsock.Listen(p)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}

// Serve runs the restart check, then answers connections on lis until ctx
// ends.
func (ib *Inbox) Serve(ctx context.Context, lis net.Listener) error {
	if recs, err := ib.cfg.records(); err == nil {
		for _, r := range recs {
			ib.replayEvents(r.Repo)
		}
	}
	ib.restartCheck()
	go ib.watchPanes(ctx, PaneCheckEvery)
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	for {
		conn, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go ib.handle(ctx, conn)
	}
}

func (ib *Inbox) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			writeJSON(conn, Response{Code: inboxInvalid, Error: "not a JSON object: " + err.Error()})
			continue
		}
		if req.Op == "watch" {
			ib.watch(ctx, conn)
			return
		}
		resp, err := ib.do(ctx, req)
		if err != nil {
			code := inboxFailed
			if e, ok := errors.AsType[*Error](err); ok {
				switch e.Code {
				case agentwire.CodeUsage:
					code = inboxInvalid
				case agentwire.CodeRefused:
					code = inboxRefused
				}
			}
			resp = &Response{Code: code, Error: err.Error()}
		} else {
			resp.OK = true
		}
		if writeJSON(conn, resp) != nil {
			return
		}
	}
}

func writeJSON(conn net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = conn.Write(append(b, '\n'))
	return err
}

func (ib *Inbox) do(ctx context.Context, req Request) (*Response, error) {
	if req.Op != "status" && req.Op != "rescan" {
		if !ValidRepoKey(req.Repo) {
			return nil, usagef("bad or missing repo key %q", req.Repo)
		}
	} else if req.Repo != "" && !ValidRepoKey(req.Repo) {
		return nil, usagef("bad repo key %q", req.Repo)
	}
	switch req.Op {
	case "send":
		if req.Start {
			return ib.start(req)
		}
		return ib.send(req)
	case "post":
		return ib.post(req)
	case "read":
		return ib.read(ctx, req)
	case "env":
		return ib.env(ctx, req)
	case "status":
		s, err := ib.sessions(req.Repo)
		return &Response{Sessions: s}, err
	case "restart":
		return ib.restart(req.Repo)
	case "event":
		return ib.event(req)
	case "rescan":
		ib.restartCheck()
		ib.notify(nil)
		return &Response{}, nil
	}
	return nil, usagef("unknown op %q", req.Op)
}

// notify wakes every long poll, and sends line to the watchers.
func (ib *Inbox) notify(line *WatchLine) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	close(ib.changed)
	ib.changed = make(chan struct{})
	if line == nil {
		return
	}
	b, _ := json.Marshal(line)
	b = append(b, '\n')
	for w := range ib.watchers {
		select {
		case w <- b:
		default: // a watcher that does not read loses lines, never blocks us
		}
	}
}

func (ib *Inbox) changes() <-chan struct{} {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.changed
}

// poll is a long poll: it calls check until check says done or fails,
// or wait has passed, then returns what check answered last. It calls
// check again on every change the inbox notifies (taking the change to
// wait for before each call, so none is missed between the two), and
// fails when ctx ends, as the inbox stops.
func (ib *Inbox) poll(ctx context.Context, wait time.Duration, check func() (resp *Response, done bool, err error)) (*Response, error) {
	deadline := time.Now().Add(wait)
	for {
		ch := ib.changes()
		resp, done, err := check()
		if err != nil {
			return nil, err
		}
		left := time.Until(deadline)
		if done || left <= 0 {
			return resp, nil
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, failedf("the inbox is stopping")
		}
		t.Stop()
	}
}

// change runs f on k's record under the repo's lock, as Config.update
// does, then wakes the long polls, and tells the watchers the record's
// status when f changed it.
func (ib *Inbox) change(k string, f func(r *record) (*record, error)) error {
	var line *WatchLine
	_, err := ib.cfg.update(k, func(r *record) (*record, error) {
		var before string
		if r != nil {
			before = r.Status
		}
		out, err := f(r)
		if err == nil && out != nil && out.Status != before {
			line = statusLine(out)
		}
		return out, err
	})
	if err != nil {
		return err
	}
	ib.notify(line)
	return nil
}

func statusLine(r *record) *WatchLine {
	return &WatchLine{Repo: r.Repo, Name: r.Name, CLI: r.CLI, OffloadID: r.OffloadID, Status: r.Status}
}

func (ib *Inbox) watch(ctx context.Context, conn net.Conn) {
	w := make(chan []byte, 256)
	ib.mu.Lock()
	ib.watchers[w] = struct{}{}
	ib.mu.Unlock()
	defer func() {
		ib.mu.Lock()
		delete(ib.watchers, w)
		ib.mu.Unlock()
	}()
	closed := make(chan struct{})
	go func() {
		// The peer sends nothing more; a read ends when it goes.
		buf := make([]byte, 1)
		conn.Read(buf)
		close(closed)
	}()
	for {
		select {
		case b := <-w:
			if _, err := conn.Write(b); err != nil {
				return
			}
		case <-closed:
			return
		case <-ctx.Done():
			return
		}
	}
}
