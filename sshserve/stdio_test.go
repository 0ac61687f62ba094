package sshserve

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// TestStdioConnOrderAndClose: bytes go out in order, all of them by the
// time Close returns, whatever the sizes of the writes.
func TestStdioConnOrderAndClose(t *testing.T) {
	pr, pw := io.Pipe()
	var got bytes.Buffer
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(&got, pr)
		read <- err
	}()
	c := StdioConn(strings.NewReader(""), pw)
	var want bytes.Buffer
	for i := range 2000 {
		b := bytes.Repeat([]byte{byte(i)}, i*37%5000+1)
		want.Write(b)
		if n, err := c.Write(b); n != len(b) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("%d bytes out, want %d, or not in order", got.Len(), want.Len())
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
}

// TestStdioConnWriteError: once the reader has gone, a later Write gets
// the error, and Close does not hang.
func TestStdioConnWriteError(t *testing.T) {
	pr, pw := io.Pipe()
	pr.CloseWithError(io.ErrClosedPipe)
	c := StdioConn(strings.NewReader(""), pw)
	var err error
	for range 100 {
		if _, err = c.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("writes to a closed pipe: %v, want io.ErrClosedPipe", err)
	}
	c.Close()
}
