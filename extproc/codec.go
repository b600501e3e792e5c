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
// message decodes as protobuf does.
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

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*extprocv3.ProcessingRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalRequest(buf.ReadOnlyData(), req)
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
