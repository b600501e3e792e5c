package extproc

import (
	"errors"
	"math"
	"sync"
	"unicode/utf8"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// The dynamic metadata of an answer (the router step's hand-over, the
// usage record for the access log, the check's API shape) is a
// google.protobuf.Struct: a map of Values. Protobuf's generic encoder
// sizes and writes a map through reflection, entry by entry, and does so
// twice a message (once to size it, once to write it): a fifth of the
// server's marshaling on a whole answer, which the no-op floor does not
// pay (7.4 µs and 48 allocations for a whole answer's two). The codec
// writes an answer's metadata itself, in one pass, after the rest of the
// message (a field may come in any order on the wire), with the encoding
// protobuf gives it (2.2 µs, the buffer reused).

// Field numbers of the dynamic_metadata of the answers the servers send.
var (
	fieldResponseMetadata = fieldOf(&extprocv3.ProcessingResponse{}, "dynamic_metadata")
	fieldCheckMetadata    = fieldOf(&authv3.CheckResponse{}, "dynamic_metadata")
)

func fieldOf(m proto.Message, name string) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)).Number()
}

// Field numbers of Struct, its map entries, Value and ListValue (fixed by
// google/protobuf/struct.proto).
const (
	structFields   protowire.Number = 1
	entryKey       protowire.Number = 1
	entryValue     protowire.Number = 2
	valueNull      protowire.Number = 1
	valueNumber    protowire.Number = 2
	valueString    protowire.Number = 3
	valueBool      protowire.Number = 4
	valueStruct    protowire.Number = 5
	valueList      protowire.Number = 6
	listValues     protowire.Number = 1
	maxStructDepth                  = 100 // deeper is no metadata of the servers, and past what Envoy parses
)

// errInvalidUTF8 is a Struct key or string value that is not UTF-8, which
// protobuf refuses to write too.
var errInvalidUTF8 = errors.New("extproc: dynamic metadata string is not valid UTF-8")

// errTooDeep is a Struct nested deeper than maxStructDepth.
var errTooDeep = errors.New("extproc: dynamic metadata nested too deep")

// takeMetadata removes m's dynamic metadata for the codec to write itself,
// returning it, its field number and a function putting it back; meta is
// nil when m has none (or is a message the codec writes whole).
func takeMetadata(m proto.Message) (meta *structpb.Struct, num protowire.Number, restore func()) {
	switch r := m.(type) {
	case *extprocv3.ProcessingResponse:
		if r.DynamicMetadata != nil {
			meta, r.DynamicMetadata = r.DynamicMetadata, nil
			return meta, fieldResponseMetadata, func() { r.DynamicMetadata = meta }
		}
	case *authv3.CheckResponse:
		if r.DynamicMetadata != nil {
			meta, r.DynamicMetadata = r.DynamicMetadata, nil
			return meta, fieldCheckMetadata, func() { r.DynamicMetadata = meta }
		}
	}
	return nil, 0, nil
}

// The metadata is written in one pass: each nested message's length is
// written after its body, in the room left for the longest varint a
// length can take, and the body moved back over what the varint did not
// use.
const lenRoom = 5 // bytes of a varint holding any length below 4 GiB

// openLen leaves room for a length at the end of b, returning where it is.
func openLen(b []byte) ([]byte, int) { return append(b, 0, 0, 0, 0, 0), len(b) }

// closeLen writes the length of what follows the room at mark.
func closeLen(b []byte, mark int) []byte {
	n := len(b) - mark - lenRoom
	v := protowire.SizeVarint(uint64(n))
	copy(b[mark+v:], b[mark+lenRoom:])
	protowire.AppendVarint(b[mark:mark], uint64(n))
	return b[:mark+v+n]
}

// appendStruct writes the fields of s (a Struct's body) to b, or the error
// protobuf would give for it.
func appendStruct(b []byte, s *structpb.Struct, depth int) ([]byte, error) {
	if depth > maxStructDepth {
		return b, errTooDeep
	}
	for k, v := range s.GetFields() {
		if !utf8.ValidString(k) {
			return b, errInvalidUTF8
		}
		var entry, val int
		var err error
		b = protowire.AppendTag(b, structFields, protowire.BytesType)
		b, entry = openLen(b)
		// The key is written even when empty, as protobuf writes it.
		b = protowire.AppendTag(b, entryKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, entryValue, protowire.BytesType)
		b, val = openLen(b)
		b, err = appendValue(b, v, depth)
		if err != nil {
			return b, err
		}
		b = closeLen(closeLen(b, val), entry)
	}
	return b, nil
}

// appendValue writes the body of v.
func appendValue(b []byte, v *structpb.Value, depth int) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case nil:
	case *structpb.Value_NullValue:
		b = protowire.AppendTag(b, valueNull, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		b = protowire.AppendTag(b, valueNumber, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return b, errInvalidUTF8
		}
		b = protowire.AppendTag(b, valueString, protowire.BytesType)
		b = protowire.AppendString(b, k.StringValue)
	case *structpb.Value_BoolValue:
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		var mark int
		var err error
		b = protowire.AppendTag(b, valueStruct, protowire.BytesType)
		b, mark = openLen(b)
		b, err = appendStruct(b, k.StructValue, depth+1)
		if err != nil {
			return b, err
		}
		b = closeLen(b, mark)
	case *structpb.Value_ListValue:
		if depth+1 > maxStructDepth {
			return b, errTooDeep
		}
		var list, mark int
		var err error
		b = protowire.AppendTag(b, valueList, protowire.BytesType)
		b, list = openLen(b)
		for _, e := range k.ListValue.GetValues() {
			b = protowire.AppendTag(b, listValues, protowire.BytesType)
			b, mark = openLen(b)
			b, err = appendValue(b, e, depth+1)
			if err != nil {
				return b, err
			}
			b = closeLen(b, mark)
		}
		b = closeLen(b, list)
	default:
		return b, errors.New("extproc: dynamic metadata value of an unknown kind")
	}
	return b, nil
}

// metaPool holds the buffers an answer's metadata is written into before
// the answer is sized (most answers' take a few hundred bytes).
var metaPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
