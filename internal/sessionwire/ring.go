package sessionwire

// Ring holds the bytes of one stream from offset Base to End, the part a
// side keeps until the peer acknowledges it, in a circular buffer that
// starts small and doubles, up to Limit bytes, only while it is full: the
// bytes are read into it and written from it in place, so a steady
// stream costs no allocation and no copy. Methods are not synchronized;
// a slice from Space or Peek stays valid while the bytes it shows are not
// dropped (Drop) and the ring does not grow.
type Ring struct {
	// Limit bounds the buffer, in bytes; it must not be zero.
	Limit int
	buf   []byte
	base  uint64
	end   uint64
}

// minRing is a ring's first buffer, in bytes.
const minRing = 64 << 10

// Base is the offset of the first byte held.
func (r *Ring) Base() uint64 { return r.base }

// End is the offset past the last byte held.
func (r *Ring) End() uint64 { return r.end }

// Len is how many bytes the ring holds.
func (r *Ring) Len() int { return int(r.end - r.base) }

// Full reports whether the ring holds Limit bytes.
func (r *Ring) Full() bool { return r.Len() >= r.Limit }

// Space returns the free room that follows End in the buffer (a
// contiguous part of it), growing or allocating the buffer when it is
// full and under Limit; nil when the ring is full. Bytes put there count
// once Commit says so.
func (r *Ring) Space() []byte {
	if r.Len() == len(r.buf) {
		if len(r.buf) >= r.Limit {
			return nil
		}
		r.grow(min(max(2*len(r.buf), minRing), r.Limit))
	}
	c := uint64(len(r.buf))
	i := r.end % c
	n := min(c-i, c-uint64(r.Len()))
	return r.buf[i : i+n]
}

// Commit adds the n bytes put at the start of Space's room.
func (r *Ring) Commit(n int) { r.end += uint64(n) }

// Write appends as much of b as the ring has room for and returns how
// much that was.
func (r *Ring) Write(b []byte) int {
	n := 0
	for n < len(b) {
		sp := r.Space()
		if len(sp) == 0 {
			break
		}
		k := copy(sp, b[n:])
		r.Commit(k)
		n += k
	}
	return n
}

// Peek returns the bytes from off (Base <= off <= End) on, at most max
// of them, as one contiguous part of the buffer: call again from past it
// for the rest.
func (r *Ring) Peek(off uint64, max int) []byte {
	if off < r.base || off >= r.end {
		return nil
	}
	c := uint64(len(r.buf))
	i := off % c
	n := min(c-i, r.end-off, uint64(max))
	return r.buf[i : i+n]
}

// Drop forgets the bytes before off (clamped to Base..End).
func (r *Ring) Drop(off uint64) {
	r.base = min(max(off, r.base), r.end)
}

// Advance moves Base and End of an empty ring on by n bytes that went
// their way without it; a ring that holds bytes is left as it is.
func (r *Ring) Advance(n int) {
	if r.Len() == 0 {
		r.base += uint64(n)
		r.end = r.base
	}
}

// Reset empties the ring at offset off and lets its buffer go.
func (r *Ring) Reset(off uint64) {
	r.buf, r.base, r.end = nil, off, off
}

// grow moves the bytes into a buffer of n bytes, each at its offset
// modulo n; the old buffer is left as it was for slices still on it.
func (r *Ring) grow(n int) {
	nb := make([]byte, n)
	for off := r.base; off < r.end; {
		p := r.Peek(off, int(r.end-off))
		for len(p) > 0 {
			i := off % uint64(n)
			k := copy(nb[i:], p)
			p = p[k:]
			off += uint64(k)
		}
	}
	r.buf = nb
}
