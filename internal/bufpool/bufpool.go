// Package bufpool is the gRPC buffer pool of the client and the local box:
// power-of-two size classes up to 4 MiB that, unlike gRPC's default pool,
// do not zero a buffer on Get. gRPC fills every buffer it gets (it reads a
// message or encodes one into exactly the length it asks for), and zeroing
// a 1 MiB buffer for each 128 KiB message cost a third of the CPU of a bulk
// transfer (docs/benchmarks.md).
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

const (
	minShift = 8  // 256 B
	maxShift = 22 // 4 MiB
)

// Pool is a mem.BufferPool; the zero value is ready to use.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool
}

var _ mem.BufferPool = (*Pool)(nil)

// Shared is the pool both ends use.
var Shared = &Pool{}

func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minShift
}

// Get returns a buffer of length n whose contents are unspecified. Lengths
// over 4 MiB are allocated and never pooled.
func (p *Pool) Get(n int) *[]byte {
	c := class(n)
	if c >= len(p.classes) {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minShift))
	return &b
}

// Put returns b to its size class; buffers of other capacities are dropped.
func (p *Pool) Put(b *[]byte) {
	c := class(cap(*b))
	if c >= len(p.classes) || cap(*b) != 1<<(c+minShift) {
		return
	}
	p.classes[c].Put(b)
}
