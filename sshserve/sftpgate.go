package sshserve

import (
	"encoding/binary"
	"io"
	"sync"
)

// SFTPQueue bounds the bytes of SFTP requests a session passes to the
// box's sftp server before their answers come back.
//
// OpenSSH's sftp-server reads up to 16 KiB of input at each turn of its
// loop and handles one request per turn, and its input queue is a buffer
// that is copied whole (and zeroed) each time it grows. A client that
// pipelines small writes faster than they are answered (PuTTY's pscp
// sends 4 KiB writes for as long as its window lets it) makes that queue
// grow to whatever is in flight, and each turn then costs a copy of it:
// quadratic. Behind sshd, what is in flight is sshd's 2 MiB channel
// window; behind us it is that window plus the stream's and the box's
// pipe, tens of MiB, and pscp's 50 MB upload took 73 times sshd's time
// (docs/benchmarks.md, "pscp"). 1 MiB is half of OpenSSH's own sftp
// client's pipeline (64 requests of 32 KiB), and a window's worth of
// requests a 20 ms path needs at 50 MB/s.
const SFTPQueue = 1 << 20

// maxSFTPPacket is the largest SFTP packet the gate counts, in bytes:
// OpenSSH's sftp-server refuses longer ones (SFTP_MAX_MSG_LENGTH,
// 256 KiB). A longer length means the stream is not SFTP as the gate
// understands it, which then stops holding anything back.
const maxSFTPPacket = 1 << 20

// sftpGate passes an SFTP session's requests (read from in) to the box
// only while the requests not yet answered (seen in the replies written
// to out) are fewer than limit bytes. SFTP answers each request with one
// reply; a reply is matched to the oldest request still open, which is
// exact for a server that answers in order (OpenSSH's does) and right in
// sum for any other.
type sftpGate struct {
	in    io.Reader
	out   io.Writer
	limit int

	mu     sync.Mutex
	cond   *sync.Cond
	open   []int // sizes of the requests passed on and not yet answered, oldest first
	queued int   // their sum
	off    bool  // the stream is not SFTP as understood, or the session has ended
	// waits counts the times a Read waited for answers.
	waits int

	req, rep framer
}

func newSFTPGate(in io.Reader, out io.Writer, limit int) *sftpGate {
	g := &sftpGate{in: in, out: out, limit: limit}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Read reads requests from in once fewer than limit bytes are open.
func (g *sftpGate) Read(p []byte) (int, error) {
	g.mu.Lock()
	if g.queued >= g.limit && !g.off {
		g.waits++
	}
	for g.queued >= g.limit && !g.off {
		g.cond.Wait()
	}
	if !g.off {
		// Overshoot the limit by at most one small read.
		p = p[:min(len(p), max(g.limit-g.queued, 4<<10))]
	}
	g.mu.Unlock()
	n, err := g.in.Read(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.off && !g.req.feed(p[:n], func(size int) {
		g.open = append(g.open, size)
		g.queued += size
	}) {
		g.stop()
	}
	return n, err
}

// Write passes replies on to out, and counts the requests they answer.
func (g *sftpGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	if !g.off && !g.rep.feed(p, g.answered) {
		g.stop()
	}
	g.mu.Unlock()
	return g.out.Write(p)
}

// answered closes the oldest open request, once a reply began.
func (g *sftpGate) answered(int) {
	if len(g.open) == 0 {
		return
	}
	g.queued -= g.open[0]
	g.open = g.open[1:]
	g.cond.Broadcast()
}

// Close lets any Read waiting go on: the session has ended.
func (g *sftpGate) Close() {
	g.mu.Lock()
	g.stop()
	g.mu.Unlock()
}

func (g *sftpGate) stop() {
	g.off = true
	g.cond.Broadcast()
}

// framer finds the packets of an SFTP stream (a uint32 length, then that
// many bytes) in the pieces it is fed.
type framer struct {
	head [4]byte
	nh   int // bytes of head read
	left int // bytes of the current packet's body still to come
}

// feed reads b and calls packet with each packet's whole size as its
// length is read; false if a length is beyond maxSFTPPacket.
func (f *framer) feed(b []byte, packet func(size int)) bool {
	for len(b) > 0 {
		if f.left > 0 {
			n := min(f.left, len(b))
			f.left -= n
			b = b[n:]
			continue
		}
		n := copy(f.head[f.nh:], b)
		f.nh += n
		b = b[n:]
		if f.nh < len(f.head) {
			return true
		}
		f.nh = 0
		size := binary.BigEndian.Uint32(f.head[:])
		if size > maxSFTPPacket {
			return false
		}
		f.left = int(size)
		packet(4 + int(size))
	}
	return true
}
