package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec is the gRPC codec of a server serving the steps (for
// grpc.ForceServerCodecV2): protobuf, except that an ext_proc message's
// metadata_context is read only on a request headers message. Envoy sends
// the namespaces the upstream step forwards (the router step's signed
// state, about 370 bytes) with every message of the step, each chunk of a
// streamed answer's included, and the step reads them on its first, the
// request headers: decoding them into a Struct on every chunk was most of
// a chunk's decoding (its maps and values), for nothing. Every other
// message decodes as protobuf does. An answer's dynamic metadata is
// written by the codec itself (structwire.go), the rest of it by protobuf.
// Its buffers come from codecPool.
func Codec() encoding.CodecV2 { return codec{encoding.GetCodecV2(grpcproto.Name)} }

type codec struct{ encoding.CodecV2 }

// Field numbers of ProcessingRequest.
var (
	fieldRequestHeaders  = fieldNumber("request_headers")
	fieldMetadataContext = fieldNumber("metadata_context")
)

func fieldNumber(name string) protowire.Number {
	return (&extprocv3.ProcessingRequest{}).ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)).Number()
}

// codecPool holds the buffers a message larger than one read is gathered
// into, and a large answer is marshaled into: a tier at every power of two
// from 256 bytes to 8 MiB. gRPC's default pool has none between 32 KiB and
// 1 MiB, and clears a pooled buffer's whole capacity each time it hands it
// out: a 40 KiB request body (a long conversation) was gathered into a
// cleared MiB, and its rewritten body marshaled into another.
var codecPool = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)
	if err != nil {
		panic(err) // cannot happen: the exponents are valid on every platform Go runs on
	}
	return p
}()

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := gather(data)
	defer buf.Free()
	if req, ok := m.(*extprocv3.ProcessingRequest); ok {
		return unmarshalRequest(buf.ReadOnlyData(), req)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// gather is a message's bytes in one buffer: its one read's as it is,
// several reads' copied into a buffer from codecPool.
func gather(data mem.BufferSlice) mem.Buffer { return data.MaterializeToBuffer(codecPool) }

// Marshal is gRPC's protobuf marshaling, a large message's buffer taken
// from codecPool.
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	// An answer's dynamic metadata is written apart (structwire.go),
	// after the rest.
	meta, num, restore := takeMetadata(m)
	var metaBytes []byte
	if meta != nil {
		defer restore()
		scratch := metaPool.Get().(*[]byte)
		defer func() {
			if cap(metaBytes) <= 64<<10 { // a rare large one is not kept
				*scratch = metaBytes[:0]
				metaPool.Put(scratch)
			}
		}()
		mb, err := appendStruct((*scratch)[:0], meta, 0)
		metaBytes = mb
		if err != nil {
			return nil, err
		}
	}
	// The size computed here is the one MarshalAppend uses.
	size := proto.Size(m)
	if meta != nil {
		size += protowire.SizeTag(num) + protowire.SizeBytes(len(metaBytes))
	}
	opts := proto.MarshalOptions{UseCachedSize: true}
	var b []byte
	var buf *[]byte
	if mem.IsBelowBufferPoolingThreshold(size) {
		b = make([]byte, 0, size)
	} else {
		buf = codecPool.Get(size)
		b = (*buf)[:0]
	}
	b, err := opts.MarshalAppend(b, m)
	if err != nil {
		if buf != nil {
			codecPool.Put(buf)
		}
		return nil, err
	}
	if meta != nil {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, metaBytes)
	}
	if buf == nil {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, codecPool)}, nil
}

// unmarshalRequest decodes b into req, without its metadata_context unless
// it is a request headers message.
func unmarshalRequest(b []byte, req *extprocv3.ProcessingRequest) error {
	start, end, ok := unreadMetadata(b)
	if !ok {
		return proto.Unmarshal(b, req)
	}
	if err := proto.Unmarshal(b[:start], req); err != nil {
		return err
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(b[end:], req)
}

// unreadMetadata finds the one metadata_context field of a message that is
// not a request headers message; ok is false when there is none to leave
// out (or the message is not one the walk understands, which protobuf then
// reads, and refuses, whole).
func unreadMetadata(b []byte) (start, end int, ok bool) {
	found := false
	for at := 0; at < len(b); {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return 0, 0, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if m < 0 {
			return 0, 0, false
		}
		switch num {
		case fieldRequestHeaders:
			return 0, 0, false
		case fieldMetadataContext:
			if found {
				return 0, 0, false // split in two: read it as it is
			}
			found, start, end = true, at, at+n+m
		}
		at += n + m
	}
	return start, end, found
}
