// Package halfclose copies byte streams with TCP's half-close: the end of
// what one side sends becomes the end of what the other side reads, while
// the other direction goes on (forwards, relays, ssh channels).
package halfclose

import (
	"io"
	"sync"
)

// closeWriter is a stream whose write side closes alone: *net.TCPConn,
// *net.UnixConn, an ssh.Channel, a relay.Conn.
type closeWriter interface{ CloseWrite() error }

// CloseWrite half-closes w with its CloseWrite method and reports whether
// w has one; a w without one is left as it is. CloseWrite's own error is
// dropped: the peer has gone, and nothing more is to be sent to it anyway.
func CloseWrite(w io.Writer) bool {
	cw, ok := w.(closeWriter)
	if ok {
		cw.CloseWrite()
	}
	return ok
}

// Copy copies src to dst until src's EOF or an error, then half-closes dst
// (CloseWrite), so that dst's reader sees EOF. It returns io.Copy's count
// of bytes and error: nil at src's EOF.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	n, err := io.Copy(dst, src)
	CloseWrite(dst)
	return n, err
}

// Join copies a to b and b to a at once, each with Copy, and returns when
// both directions have ended. It closes neither side: that is the caller's,
// who may also end a direction early by closing a side.
func Join(a, b io.ReadWriter) {
	var wg sync.WaitGroup
	wg.Go(func() { Copy(b, a) })
	wg.Go(func() { Copy(a, b) })
	wg.Wait()
}
