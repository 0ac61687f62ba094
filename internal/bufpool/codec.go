package bufpool

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec is gRPC's proto codec with its buffers from Shared. gRPC's own
// takes them from its default pool, which zeroes each one; force this one
// on both ends (grpc.ForceCodecV2, grpc.ForceServerCodecV2). Its name is
// "proto", so peers see no difference on the wire.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Marshal encodes v, a proto.Message, into one pooled buffer.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
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

// Unmarshal decodes data into v, a proto.Message.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
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
