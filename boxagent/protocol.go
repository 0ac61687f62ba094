package boxagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// Request is one line to the inbox (contract "Inbox"): Op is send, post,
// read, env, status, restart, event, rescan or watch, and the other fields
// are the op's.
type Request struct {
	Op        string          `json:"op"`
	Repo      string          `json:"repo,omitempty"`
	Name      string          `json:"name,omitempty"`
	CLI       string          `json:"cli,omitempty"`
	OffloadID string          `json:"offload_id,omitempty"`
	Body      string          `json:"body,omitempty"`
	Start     bool            `json:"start,omitempty"`
	Back      bool            `json:"back,omitempty"`
	Interrupt bool            `json:"interrupt,omitempty"`
	Prepare   bool            `json:"prepare,omitempty"`
	Kind      string          `json:"kind,omitempty"`
	Since     int             `json:"since,omitempty"`
	WaitMS    int64           `json:"wait_ms,omitempty"`
	Hook      string          `json:"hook,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

// Response is the inbox's answer line. Code is invalid, refused or failed
// when OK is false.
type Response struct {
	OK       bool                 `json:"ok"`
	Code     string               `json:"code,omitempty"`
	Error    string               `json:"error,omitempty"`
	Seq      int                  `json:"seq,omitempty"`
	Delivery string               `json:"delivery,omitempty"`
	Entries  []agentwire.Entry    `json:"entries,omitempty"`
	Status   string               `json:"status,omitempty"`
	Sessions []agentwire.Session  `json:"sessions,omitempty"`
	Report   *agentwire.EnvReport `json:"report,omitempty"`
	Fault    *agentwire.Fault     `json:"fault,omitempty"`
}

// Inbox error codes.
const (
	inboxInvalid = "invalid"
	inboxRefused = "refused"
	inboxFailed  = "failed"
)

// WatchLine is one line of the watch op: an outbox entry (Entry and Seq
// set) or a status change (both unset). Never a body.
type WatchLine struct {
	Repo      string `json:"repo"`
	Name      string `json:"name"`
	CLI       string `json:"cli"`
	OffloadID string `json:"offload_id"`
	Entry     string `json:"entry,omitempty"`
	Seq       int    `json:"seq,omitempty"`
	Status    string `json:"status"`
}

// maxLine is the longest request or response line, in bytes.
const maxLine = 16 << 20

// dialWait is how long a verb waits for the inbox's socket to appear or
// accept: a box that just woke starts its inbox.
const dialWait = 3 * time.Second

// errNoInbox is in the error of a request that never reached the inbox:
// its socket was not there, or refused, for dialWait.
var errNoInbox = errors.New("the inbox is not running")

func (c *Config) dial() (net.Conn, error) {
	p := c.SocketPath()
	deadline := time.Now().Add(dialWait)
	for {
		conn, err := unixsock.Dial(p)
		if err == nil {
			return conn, nil
		}
		if !(errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)) || time.Now().After(deadline) {
			return nil, &Error{Code: agentwire.CodeInbox, Err: fmt.Errorf("%w (%s)", errNoInbox, p)}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends one request to the inbox and reads its answer; an answer with
// ok false becomes an *Error (invalid is usage).
func (c *Config) call(req Request) (*Response, error) {
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, &Error{Code: agentwire.CodeInbox, Err: fmt.Errorf("the inbox closed the connection: %v", err)}
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	if !sc.Scan() {
		return nil, &Error{Code: agentwire.CodeInbox, Err: errors.New("the inbox closed the connection without an answer")}
	}
	var resp Response
	if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("the inbox's answer: %w", err)
	}
	if !resp.OK {
		code := agentwire.CodeFailed
		switch resp.Code {
		case inboxInvalid:
			code = agentwire.CodeUsage
		case inboxRefused:
			code = agentwire.CodeRefused
		}
		return nil, &Error{Code: code, Err: errors.New(resp.Error)}
	}
	return &resp, nil
}

func (c *Config) outboxPath(k string) string { return filepath.Join(c.repoDir(k), "outbox.jsonl") }
func (c *Config) inboxPath(k string) string  { return filepath.Join(c.repoDir(k), "inbox.jsonl") }

// appendLine appends v as one JSON line to path (0600).
func appendLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readOutbox returns k's outbox entries after seq since.
func (c *Config) readOutbox(k string, since int) ([]agentwire.Entry, error) {
	f, err := os.Open(c.outboxPath(k))
	if errors.Is(err, os.ErrNotExist) {
		return []agentwire.Entry{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	out := []agentwire.Entry{}
	for sc.Scan() {
		var e agentwire.Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Seq > since {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
