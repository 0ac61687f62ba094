package bufpool

import (
	"fmt"
	"slices"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec is gRPC's proto codec with its buffers from Shared. gRPC's own
// takes them from its default pool, which zeroes each one; force this one
// on both ends (grpc.ForceCodecV2, grpc.ForceServerCodecV2). Its name is
// "proto", so peers see no difference on the wire.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Raw is a message encoded by its sender, in pieces that go on the wire
// as they are, without a copy: the sender keeps each piece unchanged
// until the transport has written it (gRPC gives no word of that; a
// sender knows it from its peer's answer, such as an acknowledgement).
// Send it with SendMsg on a stream that uses Codec, no stats handler or
// binary log attached.
type Raw [][]byte

// Marshal encodes v, a proto.Message, into one pooled buffer; a Raw goes
// as its pieces.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(Raw); ok {
		bs := make(mem.BufferSlice, 0, len(r))
		for _, p := range r {
			if len(p) > 0 {
				bs = append(bs, mem.SliceBuffer(p))
			}
		}
		return bs, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: cannot marshal %T, not a proto.Message", v)
	}
	size := proto.Size(m)
	// UseCachedSize is safe: Size has just run and m is not shared.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := Shared.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		Shared.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, Shared)}, nil
}

// Unmarshal decodes data into v, a proto.Message or a *Chunk.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if c, ok := v.(*Chunk); ok {
		return c.unmarshal(data)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto: cannot unmarshal into %T, not a proto.Message", v)
	}
	if len(data) == 1 {
		return proto.Unmarshal(data[0].ReadOnlyData(), m)
	}
	buf := data.MaterializeToBuffer(Shared)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Name is "proto", the content-subtype gRPC's own proto codec uses.
func (Codec) Name() string { return "proto" }

// Chunk receives a message whose one field may be bulk bytes (an Exec's
// stdin, stdout or stderr) without the copy and the allocation
// proto.Unmarshal makes of a bytes field: pass it to RecvMsg of a stream
// that uses Codec. When the message on the wire is one length-delimited
// field whose number is in Fields, Field and Data are set, Data points into
// a pooled buffer, and Msg is left as it was; otherwise Field is 0 and the
// message is decoded into Msg. Free the chunk once Data is used.
type Chunk struct {
	// Fields are the numbers of the bytes fields to receive as Data.
	Fields []protowire.Number
	// Msg receives any other message.
	Msg proto.Message

	// Field is the number of the field in Data, or 0.
	Field protowire.Number
	// Data is the field's bytes, valid until Free.
	Data []byte
	buf  mem.Buffer
}

func (c *Chunk) unmarshal(data mem.BufferSlice) error {
	c.Free()
	var buf mem.Buffer
	if len(data) == 1 {
		buf = data[0]
		buf.Ref()
	} else {
		buf = data.MaterializeToBuffer(Shared)
	}
	b := buf.ReadOnlyData()
	if num, typ, n := protowire.ConsumeTag(b); n > 0 && typ == protowire.BytesType && slices.Contains(c.Fields, num) {
		if v, m := protowire.ConsumeBytes(b[n:]); m > 0 && n+m == len(b) {
			c.Field, c.Data, c.buf = num, v, buf
			return nil
		}
	}
	defer buf.Free()
	return proto.Unmarshal(b, c.Msg)
}

// FieldNumber is the number of m's field name, for Chunk.Fields; it
// panics if m has no such field (a name out of step with the .proto).
func FieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic(fmt.Sprintf("bufpool: %T has no field %s", m, name))
	}
	return f.Number()
}

// Free gives Data's buffer back to the pool and clears Field and Data.
func (c *Chunk) Free() {
	if c.buf != nil {
		c.buf.Free()
	}
	c.Field, c.Data, c.buf = 0, nil, nil
}
