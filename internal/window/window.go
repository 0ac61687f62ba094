// Package window holds the HTTP/2 flow-control windows of our gRPC
// connections, shared by the client (box/) and the local box (localbox/).
//
// A window is how many bytes a peer may send on a stream (or a connection)
// before the receiver has read them, so one stream moves at most
// Stream/RTT: 16 MiB carries 335 MB/s at 50 ms. The receiver buffers the
// window only while its reader lags, so memory stays bounded by it. A fixed
// window turns off gRPC's BDP estimation, which starts at 64 KiB and grows
// too slowly for a transfer of a few seconds, and never past 16 MiB
// (docs/benchmarks.md, "Window sizes at 50 ms"). A control master, whose
// connection lasts, measures its link's round trip and sizes its windows
// to it (ForRTT).
package window

import "time"

const (
	// Stream is the per-stream window, in bytes.
	Stream = 16 << 20
	// Conn is the per-connection window, in bytes: room for a few streams
	// at full speed at once (git's and rsync's commands run one or two).
	Conn = 64 << 20

	// LocalStream is the per-stream window, in bytes, of a hop over a
	// unix socket (a local box's, a control master's), whose round trip is
	// microseconds, or of a TCP path a control master measured shorter
	// than its sharing bound (box.Sharing.MinRTT, 2 ms by default: 4 MiB
	// carries 2 GB/s there): 4 MiB is more than one stream can use, and it
	// bounds what a receiver slower than its sender holds, so that the
	// client stays within about 35 MiB of RSS whatever the size of a
	// transfer (docs/benchmarks.md).
	LocalStream = 4 << 20
	// LocalConn is the per-connection window, in bytes, of such a hop.
	LocalConn = 16 << 20

	// Rate is the rate, in bytes per second, that ForRTT sizes a stream
	// for: about what one stream carries through TLS and gRPC's framing
	// on one core.
	Rate = 1 << 30
	// MaxStream is the largest per-stream window ForRTT gives, in bytes:
	// what one stream whose reader lags may leave buffered in the
	// receiver.
	MaxStream = 64 << 20
)

// ForRTT returns the per-stream and per-connection windows, in bytes, of
// a path whose round trip was measured as rtt: enough for one stream to
// reach Rate, as gRPC returns a window a quarter at a time (so about three
// quarters of it are in flight), between Stream and MaxStream; the
// connection's is four streams' worth, as Conn is of Stream.
func ForRTT(rtt time.Duration) (stream, conn int32) {
	w := Rate * rtt.Seconds() * 4 / 3
	s := int32(Stream)
	switch {
	case w >= MaxStream:
		s = MaxStream
	case w > Stream:
		s = int32(w)
	}
	return s, 4 * s
}
