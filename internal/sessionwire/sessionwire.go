// Package sessionwire is the framing of a resumable session between the
// client (box's Exec) and the box half (cocoonbox-agent session), carried
// over an Exec's stdin and stdout (docs/protocol.md "Resumable sessions").
// Each frame is a type byte, a 4-byte big-endian payload length and the
// payload. Byte streams are numbered by offset: a data frame says where its
// bytes start, an ack up to where the peer has them, so either side can
// send again what the other may not have and drop what it has twice.
package sessionwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the framing's version, in the box's hello.
const Version = 1

// Frame types.
const (
	// Hello (box to client) opens every attachment: Off is the stdin
	// offset the command has been given (an ack), Text the session id.
	Hello = 'H'
	// Resume (client to box, first on every attachment): Off and Off2 are
	// the stdout and stderr offsets the client has; the box sends from
	// there.
	Resume = 'R'
	// Data carries bytes of Stream starting at Off.
	Data = 'D'
	// EOF (client to box) closes the command's stdin at offset Off.
	EOF = 'E'
	// Ack says the sender has Stream up to Off: the peer may drop it.
	Ack = 'A'
	// Signal (client to box) sends signal Text ("INT") to the command's
	// process group.
	Signal = 'S'
	// Resize (client to box) sets the terminal to Rows×Cols.
	Resize = 'W'
	// CloseStdout (client to box): the client reads no more stdout
	// (eow@openssh.com); the command's next write to it fails.
	CloseStdout = 'C'
	// Exit (box to client) is how the command ended: Code, or Text the
	// signal's name, Text2 an error.
	Exit = 'X'
	// Bye (client to box) acknowledges the exit: the session is over.
	Bye = 'B'
	// Kill (client to box) ends the command now (a deliberate end).
	Kill = 'K'
	// Fail (box to client) says why the session cannot go on (Text).
	Fail = 'F'
)

// Streams of Data and Ack frames. Signals is no byte stream: an Ack of
// it (box to client) says how many Signal frames the session has taken
// in all (the first frame after every hello, and at each new one), so
// that a client sends again those an attachment lost, and only those.
const (
	Stdin   = 0
	Stdout  = 1
	Stderr  = 2
	Signals = 3
)

// MaxPayload bounds one frame's payload, in bytes.
const MaxPayload = 1 << 20

// Frame is one decoded frame; which fields a type uses is said at the type.
type Frame struct {
	Type       byte
	Stream     byte
	Off, Off2  uint64
	Data       []byte
	Text       string
	Text2      string
	Code       int32
	Rows, Cols uint32
}

// Append appends f's encoding to dst.
func Append(dst []byte, f Frame) []byte {
	var p []byte
	switch f.Type {
	case Hello:
		p = binary.BigEndian.AppendUint32(p, Version)
		p = binary.BigEndian.AppendUint64(p, f.Off)
		p = append(p, f.Text...)
	case Resume:
		p = binary.BigEndian.AppendUint64(p, f.Off)
		p = binary.BigEndian.AppendUint64(p, f.Off2)
	case Data:
		return AppendData(dst, f.Stream, f.Off, f.Data)
	case EOF, Ack:
		p = append(p, f.Stream)
		p = binary.BigEndian.AppendUint64(p, f.Off)
	case Signal, Fail:
		p = append(p, f.Text...)
	case Resize:
		p = binary.BigEndian.AppendUint32(p, f.Rows)
		p = binary.BigEndian.AppendUint32(p, f.Cols)
	case Exit:
		p = binary.BigEndian.AppendUint32(p, uint32(f.Code))
		p = binary.BigEndian.AppendUint16(p, uint16(len(f.Text)))
		p = append(p, f.Text...)
		p = append(p, f.Text2...)
	}
	dst = append(dst, f.Type)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
	return append(dst, p...)
}

// AppendData appends a Data frame of stream's bytes b starting at off.
func AppendData(dst []byte, stream byte, off uint64, b []byte) []byte {
	return append(AppendDataHeader(dst, stream, off, len(b)), b...)
}

// AppendDataHeader appends the header of a Data frame of stream whose n
// bytes start at off: the payload is to follow it (a writev's next
// buffer).
func AppendDataHeader(dst []byte, stream byte, off uint64, n int) []byte {
	dst = append(dst, Data)
	dst = binary.BigEndian.AppendUint32(dst, uint32(9+n))
	dst = append(dst, stream)
	return binary.BigEndian.AppendUint64(dst, off)
}

// ErrFrame is a frame that does not decode.
var ErrFrame = errors.New("sessionwire: malformed frame")

// decode decodes payload p of type t. Data aliases p.
func decode(t byte, p []byte) (Frame, error) {
	f := Frame{Type: t}
	need := func(n int) bool { return len(p) >= n }
	switch t {
	case Hello:
		if !need(12) {
			return f, ErrFrame
		}
		if v := binary.BigEndian.Uint32(p); v != Version {
			return f, fmt.Errorf("sessionwire: version %d, want %d", v, Version)
		}
		f.Off, f.Text = binary.BigEndian.Uint64(p[4:]), string(p[12:])
	case Resume:
		if !need(16) {
			return f, ErrFrame
		}
		f.Off, f.Off2 = binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
	case Data, EOF, Ack:
		if !need(9) {
			return f, ErrFrame
		}
		f.Stream, f.Off = p[0], binary.BigEndian.Uint64(p[1:])
		if f.Type == Data {
			f.Data = p[9:]
		}
	case Signal, Fail:
		f.Text = string(p)
	case Resize:
		if !need(8) {
			return f, ErrFrame
		}
		f.Rows, f.Cols = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
	case Exit:
		if !need(6) {
			return f, ErrFrame
		}
		f.Code = int32(binary.BigEndian.Uint32(p))
		n := int(binary.BigEndian.Uint16(p[4:]))
		if len(p) < 6+n {
			return f, ErrFrame
		}
		f.Text, f.Text2 = string(p[6:6+n]), string(p[6+n:])
	case CloseStdout, Bye, Kill:
	default:
		return f, fmt.Errorf("sessionwire: unknown frame type %q", t)
	}
	return f, nil
}

// Read reads one frame from r. Data aliases a buffer of its own.
func Read(r *bufio.Reader) (Frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPayload+64 {
		return Frame{}, ErrFrame
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return Frame{}, io.ErrUnexpectedEOF
	}
	return decode(hdr[0], p)
}

// Parser decodes frames from a byte stream that arrives in pieces of any
// size (an io.Writer's calls, a socket's reads) without holding a Data
// frame's payload: a Data frame is handed on in as many pieces as it
// arrived in, each a Frame of type Data whose Off is where its piece
// starts. The zero value is ready to use.
type Parser struct {
	// hdr gathers a frame's header, and the whole of a frame that is not
	// Data.
	hdr []byte
	// left is how much of the current Data frame's payload is still to
	// come; stream and off say whose and where its next byte is.
	left   int
	stream byte
	off    uint64
}

// DataHeader is the size of a Data frame's header (type, length,
// stream, offset), in bytes.
const DataHeader = 14

const dataHeader = DataHeader

// Feed decodes every frame, or piece of a Data frame, in what came before
// and b, calling fn for each; Data aliases b, or memory valid only during
// the call. It stops at fn's first error.
func (ps *Parser) Feed(b []byte, fn func(Frame) error) error {
	for len(b) > 0 {
		if ps.left > 0 {
			n := min(ps.left, len(b))
			f := Frame{Type: Data, Stream: ps.stream, Off: ps.off, Data: b[:n]}
			ps.left -= n
			ps.off += uint64(n)
			b = b[n:]
			if err := fn(f); err != nil {
				return err
			}
			continue
		}
		// What the frame's header, or the frame, needs: 5 bytes first.
		need := 5
		var h []byte
		if len(ps.hdr) == 0 && len(b) >= need {
			h = b
		} else {
			h, b = ps.gather(need, b)
			if h == nil {
				return nil
			}
		}
		n := binary.BigEndian.Uint32(h[1:])
		if n > MaxPayload+64 {
			return ErrFrame
		}
		need = 5 + int(n)
		if h[0] == Data {
			if n < dataHeader-5 {
				return ErrFrame
			}
			need = dataHeader
		}
		if len(ps.hdr) == 0 && len(b) >= need {
			h, b = b[:need], b[need:]
		} else if h, b = ps.gather(need, b); h == nil {
			return nil
		}
		ps.hdr = ps.hdr[:0]
		if h[0] == Data {
			ps.stream, ps.off, ps.left = h[5], binary.BigEndian.Uint64(h[6:]), int(n)-(dataHeader-5)
			continue
		}
		f, err := decode(h[0], h[5:need])
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// gather moves from b into ps.hdr until it holds need bytes; it returns
// them and the rest of b, or nil when b ran out first.
func (ps *Parser) gather(need int, b []byte) ([]byte, []byte) {
	k := min(max(need-len(ps.hdr), 0), len(b))
	ps.hdr = append(ps.hdr, b[:k]...)
	b = b[k:]
	if len(ps.hdr) < need {
		return nil, b
	}
	return ps.hdr, b
}

// Pending is how many bytes of an unfinished frame the parser holds or
// still waits for: 0 between frames.
func (ps *Parser) Pending() int { return len(ps.hdr) + ps.left }

// InData reports the stream of the Data frame whose payload the next
// bytes fed continue, the offset they start at and how many of them the
// frame has left; ok is false between frames and within a header.
func (ps *Parser) InData() (stream byte, off uint64, left int, ok bool) {
	return ps.stream, ps.off, ps.left, ps.left > 0
}

// Skip takes the next n bytes of the current Data frame's payload
// (n at most InData's left) as passed on by the caller without Feed: a
// payload moved by splice(2) from one pipe to another.
func (ps *Parser) Skip(n int) {
	n = min(n, ps.left)
	ps.left -= n
	ps.off += uint64(n)
}

// Info is one session a box's holder keeps, as `cocoonbox-agent session
// list` prints it (one JSON object a line) and the client reads it.
type Info struct {
	// ID names the session to an attach.
	ID string `json:"id"`
	// Line is the command line; empty for a login shell.
	Line string `json:"line"`
	// Term is the terminal's type; empty for a command without one.
	Term string `json:"term,omitempty"`
	// Attached says a client is attached now.
	Attached bool `json:"attached"`
	// StartedMs is when the command started, DetachedMs when its last
	// client went (0 while attached), in Unix milliseconds.
	StartedMs  int64 `json:"started_ms"`
	DetachedMs int64 `json:"detached_ms,omitempty"`
	// Exited says the command has ended and its client not taken the
	// exit yet.
	Exited bool `json:"exited,omitempty"`
}
