package sshserve

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"
)

// sftpPackets is n SFTP packets of size bytes each (the length included),
// each numbered in its body.
func sftpPackets(n, size int) []byte {
	var b bytes.Buffer
	for i := range n {
		p := make([]byte, size)
		binary.BigEndian.PutUint32(p, uint32(size-4))
		binary.BigEndian.PutUint32(p[4:], uint32(i))
		b.Write(p)
	}
	return b.Bytes()
}

// gateReader reads all of g in a goroutine; done receives what it read.
func gateReader(g *sftpGate) <-chan []byte {
	done := make(chan []byte, 1)
	go func() {
		var got bytes.Buffer
		buf := make([]byte, 128<<10)
		for {
			n, err := g.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				done <- got.Bytes()
				return
			}
		}
	}()
	return done
}

// waited is how many times a Read has waited for answers.
func (g *sftpGate) waited() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits
}

// TestSFTPGateHoldsRequests: a client's requests pass to the box only
// while fewer than the limit's bytes of them are unanswered; each answer
// lets more through, and the bytes pass unchanged.
func TestSFTPGateHoldsRequests(t *testing.T) {
	const limit = 64 << 10
	in := sftpPackets(2000, 4096+13) // 8 MiB of pscp-sized writes
	var replies bytes.Buffer
	g := newSFTPGate(bytes.NewReader(in), &replies, limit)
	done := gateReader(g)
	var got []byte
	// Each answer goes once the reader waits for one more time.
	for answered, seen := 0, 0; got == nil; {
		select {
		case got = <-done:
			continue
		default:
		}
		if g.waited() == seen {
			runtime.Gosched()
			continue
		}
		seen = g.waited()
		g.mu.Lock()
		queued := g.queued
		g.mu.Unlock()
		if queued > limit+4<<10+4096+13 {
			t.Fatalf("%d bytes of requests passed unanswered, with a limit of %d", queued, limit)
		}
		// Answer one request: a status reply, in two writes.
		reply := sftpPackets(1, 28)
		g.Write(reply[:3])
		g.Write(reply[3:])
		answered++
		if answered > 2000 {
			t.Fatal("more answers than requests, and the reader still waits")
		}
	}
	if g.waited() == 0 {
		t.Error("the reader never waited for an answer: 8 MiB passed unanswered")
	}
	if !bytes.Equal(got, in) {
		t.Errorf("the requests came through changed: %d bytes of %d", len(got), len(in))
	}
	if replies.Len() == 0 {
		t.Error("no reply reached the client")
	}
}

// TestSFTPGateNotSFTP: a stream whose length words are not SFTP's is
// passed on without holding anything back, and Close releases a reader
// that waits.
func TestSFTPGateNotSFTP(t *testing.T) {
	in := bytes.Repeat([]byte{0xff}, 4<<20)
	g := newSFTPGate(bytes.NewReader(in), io.Discard, 64<<10)
	if got := <-gateReader(g); !bytes.Equal(got, in) {
		t.Errorf("got %d bytes of %d", len(got), len(in))
	}

	g = newSFTPGate(bytes.NewReader(sftpPackets(100, 4096)), io.Discard, 4096)
	done := gateReader(g)
	for g.waited() == 0 {
		runtime.Gosched()
	}
	g.Close()
	if got := <-done; len(got) != 100*4096 {
		t.Errorf("after Close: %d bytes of %d", len(got), 100*4096)
	}
}
