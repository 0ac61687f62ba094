package sessionwire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Frames fed in pieces of every size come out whole, Data as pieces
// that cover the payload in order, and each payload's bytes are the ones
// sent.
func TestParserPieces(t *testing.T) {
	payload := make([]byte, 300<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var wire []byte
	wire = Append(wire, Frame{Type: Hello, Off: 5, Text: "id"})
	wire = AppendData(wire, Stdout, 1000, payload)
	wire = Append(wire, Frame{Type: Ack, Stream: Stdin, Off: 77})
	wire = AppendData(wire, Stderr, 0, []byte("e"))
	wire = AppendData(wire, Stdout, 1000+uint64(len(payload)), nil)
	wire = Append(wire, Frame{Type: Exit, Code: 3, Text2: "why"})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 5, 13, 14, 15, 4096, 1 << 20} {
		var ps Parser
		var got []Frame
		var out, errb bytes.Buffer
		for b := wire; len(b) > 0; {
			n := min(len(b), 1+rng.IntN(max))
			err := ps.Feed(b[:n], func(f Frame) error {
				if f.Type == Data {
					w, base := &out, uint64(1000)
					if f.Stream == Stderr {
						w, base = &errb, 0
					}
					if f.Off != base+uint64(w.Len()) {
						t.Fatalf("pieces of %d: data of %d at %d after %d bytes", max, f.Stream, f.Off, w.Len())
					}
					w.Write(f.Data)
					return nil
				}
				got = append(got, f)
				return nil
			})
			if err != nil {
				t.Fatalf("pieces of %d: %v", max, err)
			}
			b = b[n:]
		}
		if ps.Pending() != 0 {
			t.Errorf("pieces of %d: %d bytes pending", max, ps.Pending())
		}
		if !bytes.Equal(out.Bytes(), payload) || errb.String() != "e" {
			t.Errorf("pieces of %d: stdout %d bytes (equal %v), stderr %q", max, out.Len(), bytes.Equal(out.Bytes(), payload), errb.String())
		}
		if len(got) != 3 || got[0].Type != Hello || got[0].Off != 5 || got[0].Text != "id" ||
			got[1].Type != Ack || got[1].Off != 77 || got[2].Type != Exit || got[2].Code != 3 || got[2].Text2 != "why" {
			t.Errorf("pieces of %d: frames %+v", max, got)
		}
	}
}

// A frame longer than MaxPayload and an unknown type are refused.
func TestParserBad(t *testing.T) {
	var ps Parser
	if err := ps.Feed([]byte{Data, 0xff, 0, 0, 0}, func(Frame) error { return nil }); err != ErrFrame {
		t.Errorf("huge frame: %v", err)
	}
	ps = Parser{}
	if err := ps.Feed([]byte{'?', 0, 0, 0, 0}, func(Frame) error { return nil }); err == nil {
		t.Error("unknown type: no error")
	}
}

// A ring keeps the bytes from the last drop on, in order across its
// wrap and its growth, and holds no more than its limit.
func TestRing(t *testing.T) {
	r := &Ring{Limit: 200 << 10}
	var sent, want []byte
	rng := rand.New(rand.NewPCG(3, 4))
	next := byte(0)
	for round := 0; round < 2000; round++ {
		// Put some bytes in.
		sp := r.Space()
		if r.Len() > r.Limit {
			t.Fatalf("holds %d > limit %d", r.Len(), r.Limit)
		}
		if sp == nil && !r.Full() {
			t.Fatal("no space while not full")
		}
		n := min(len(sp), rng.IntN(40<<10))
		for i := range n {
			sp[i] = next
			want = append(want, next)
			next++
		}
		r.Commit(n)
		// Read some out from the base, as a sender would.
		for off := r.Base(); off < r.End(); {
			p := r.Peek(off, 1+rng.IntN(30<<10))
			sent = append(sent[:0], p...)
			if !bytes.Equal(sent, want[off-r.Base():off-r.Base()+uint64(len(p))]) {
				t.Fatalf("round %d: bytes at %d differ", round, off)
			}
			off += uint64(len(p))
		}
		// Drop some.
		d := uint64(rng.IntN(r.Len() + 1))
		r.Drop(r.Base() + d)
		want = want[d:]
	}
	if r.Write(make([]byte, 1<<20)) != r.Limit-r.Len() && !r.Full() {
		t.Error("Write did not fill the ring")
	}
}

func TestRingAdvance(t *testing.T) {
	r := Ring{Limit: 8}
	r.Advance(5)
	if r.Base() != 5 || r.End() != 5 {
		t.Fatalf("empty ring advanced to %d..%d, want 5..5", r.Base(), r.End())
	}
	r.Write([]byte("abc"))
	r.Advance(2)
	if r.Base() != 5 || r.End() != 8 || string(r.Peek(5, 8)) != "abc" {
		t.Fatalf("a ring that holds bytes moved: %d..%d %q", r.Base(), r.End(), r.Peek(5, 8))
	}
}

// InData names the payload under way after a Data frame's header, and
// Skip takes part of it as passed on elsewhere: the next piece fed starts
// past it, and the frame after it decodes.
func TestParserSkip(t *testing.T) {
	var wire []byte
	wire = AppendData(wire, Stdin, 100, bytes.Repeat([]byte{'x'}, 1000))
	wire = Append(wire, Frame{Type: EOF, Stream: Stdin, Off: 1100})
	var ps Parser
	var got []Frame
	fn := func(f Frame) error {
		f.Data = bytes.Clone(f.Data)
		got = append(got, f)
		return nil
	}
	if _, _, _, in := ps.InData(); in {
		t.Fatal("InData before any byte")
	}
	if err := ps.Feed(wire[:DataHeader+10], fn); err != nil {
		t.Fatal(err)
	}
	st, off, left, in := ps.InData()
	if !in || st != Stdin || off != 110 || left != 990 {
		t.Fatalf("InData = %d %d %d %v, want stdin at 110 with 990 left", st, off, left, in)
	}
	ps.Skip(900)
	if err := ps.Feed(wire[DataHeader+910:], fn); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Off != 1010 || len(got[1].Data) != 90 || got[2].Type != EOF || got[2].Off != 1100 {
		t.Fatalf("frames %+v", got)
	}
	if _, _, _, in := ps.InData(); in || ps.Pending() != 0 {
		t.Fatal("still in a frame at the end")
	}
}
