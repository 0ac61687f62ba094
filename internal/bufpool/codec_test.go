package bufpool_test

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// split cuts b into buffers of at most n bytes, as gRPC hands over a
// message that came in several HTTP/2 frames.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return s
}

func TestChunk(t *testing.T) {
	const stdout, stderr = 2, 3
	out := bytes.Repeat([]byte{7, 0, 9}, 50000)
	withUnknown, _ := proto.Marshal(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: []byte("x")}})
	withUnknown = protowire.AppendTag(withUnknown, 99, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 1)
	for _, tc := range []struct {
		name  string
		msg   *controlv1.ExecResponse
		wire  []byte
		field protowire.Number
		data  []byte
	}{
		{name: "stdout", msg: &controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: out}}, field: stdout, data: out},
		{name: "stderr", msg: &controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stderr{Stderr: []byte("oops")}}, field: stderr, data: []byte("oops")},
		{name: "empty stdout", msg: &controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{}}, field: stdout, data: []byte{}},
		{name: "exit", msg: &controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{Code: 3}}}},
		{name: "stdout and an unknown field", wire: withUnknown},
	} {
		wire := tc.wire
		if wire == nil {
			var err error
			if wire, err = proto.Marshal(tc.msg); err != nil {
				t.Fatal(err)
			}
		}
		for _, frame := range []int{1 << 20, 16 << 10, 3} {
			r := &controlv1.ExecResponse{}
			c := &bufpool.Chunk{Fields: []protowire.Number{stdout, stderr}, Msg: r}
			if err := (bufpool.Codec{}).Unmarshal(split(wire, frame), c); err != nil {
				t.Fatalf("%s in frames of %d: %v", tc.name, frame, err)
			}
			if c.Field != tc.field || !bytes.Equal(c.Data, tc.data) {
				t.Errorf("%s in frames of %d: field %d with %d bytes, want %d with %d", tc.name, frame, c.Field, len(c.Data), tc.field, len(tc.data))
			}
			if tc.field == 0 {
				want := &controlv1.ExecResponse{}
				proto.Unmarshal(wire, want)
				if !proto.Equal(r, want) {
					t.Errorf("%s in frames of %d: Msg is %v, want %v", tc.name, frame, r, want)
				}
			}
			c.Free()
			if c.Field != 0 || c.Data != nil {
				t.Errorf("%s: Free left field %d and %d bytes", tc.name, c.Field, len(c.Data))
			}
		}
	}
}

// A Raw message goes as its pieces, the same buffers (not copies), and
// decodes as the message its sender encoded.
func TestRaw(t *testing.T) {
	body := bytes.Repeat([]byte("stdin "), 30000)
	prefix := protowire.AppendTag(nil, 2, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(3+len(body)))
	bs, err := (bufpool.Codec{}).Marshal(bufpool.Raw{prefix, []byte("abc"), nil, body})
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 || &bs[2].ReadOnlyData()[0] != &body[0] {
		t.Fatalf("%d buffers, the last a copy: want the 3 pieces given, not empty, as they are", len(bs))
	}
	var m controlv1.ExecRequest
	if err := (bufpool.Codec{}).Unmarshal(bs, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetStdin(); !bytes.Equal(got, append([]byte("abc"), body...)) {
		t.Fatalf("stdin of %d bytes, want %d", len(got), 3+len(body))
	}
}
