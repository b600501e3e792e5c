package extproc

import (
	"errors"
	"math"
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
// sizes and writes a map through reflection, entry by entry, and did so
// twice a message (once to size it, once to write it): a fifth of the
// server's marshaling on a whole answer, which the no-op floor does not
// pay. The codec writes an answer's metadata itself, after the rest of the
// message (a field may come in any order on the wire), with the encoding
// protobuf gives it.

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

// errTooDeep is a Struct nested deeper than protobuf reads.
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

// messageFieldSize is the size of field num holding a message of n bytes.
func messageFieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// structSize is the encoded size of s, or an error protobuf would give
// for it.
func structSize(s *structpb.Struct, depth int) (int, error) {
	if depth > maxStructDepth {
		return 0, errTooDeep
	}
	n := 0
	for k, v := range s.GetFields() {
		if !utf8.ValidString(k) {
			return 0, errInvalidUTF8
		}
		e, err := entrySize(k, v, depth)
		if err != nil {
			return 0, err
		}
		n += messageFieldSize(structFields, e)
	}
	return n, nil
}

func entrySize(k string, v *structpb.Value, depth int) (int, error) {
	n := protowire.SizeTag(entryKey) + protowire.SizeBytes(len(k)) // written even when empty, as protobuf does
	vs, _, err := valueSize(v, depth)
	if err != nil {
		return 0, err
	}
	return n + messageFieldSize(entryValue, vs), nil
}

// valueSize is the encoded size of v and, for a struct or a list, of
// that message's body (inner), which appendValue takes.
func valueSize(v *structpb.Value, depth int) (size, inner int, err error) {
	switch k := v.GetKind().(type) {
	case nil:
		return 0, 0, nil
	case *structpb.Value_NullValue:
		return protowire.SizeTag(valueNull) + protowire.SizeVarint(uint64(k.NullValue)), 0, nil
	case *structpb.Value_NumberValue:
		return protowire.SizeTag(valueNumber) + protowire.SizeFixed64(), 0, nil
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return 0, 0, errInvalidUTF8
		}
		return protowire.SizeTag(valueString) + protowire.SizeBytes(len(k.StringValue)), 0, nil
	case *structpb.Value_BoolValue:
		return protowire.SizeTag(valueBool) + 1, 0, nil
	case *structpb.Value_StructValue:
		n, err := structSize(k.StructValue, depth+1)
		return messageFieldSize(valueStruct, n), n, err
	case *structpb.Value_ListValue:
		n, err := listSize(k.ListValue, depth+1)
		return messageFieldSize(valueList, n), n, err
	}
	return 0, 0, errors.New("extproc: dynamic metadata value of an unknown kind")
}

func listSize(l *structpb.ListValue, depth int) (int, error) {
	if depth > maxStructDepth {
		return 0, errTooDeep
	}
	n := 0
	for _, v := range l.GetValues() {
		vs, _, err := valueSize(v, depth)
		if err != nil {
			return 0, err
		}
		n += messageFieldSize(listValues, vs)
	}
	return n, nil
}

// appendStruct writes s, already sized by structSize (which validated it),
// as the body of a message field.
func appendStruct(b []byte, s *structpb.Struct, depth int) []byte {
	for k, v := range s.GetFields() {
		vs, inner, _ := valueSize(v, depth)
		e := protowire.SizeTag(entryKey) + protowire.SizeBytes(len(k)) + messageFieldSize(entryValue, vs)
		b = protowire.AppendTag(b, structFields, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(e))
		b = protowire.AppendTag(b, entryKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, entryValue, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(vs))
		b = appendValue(b, v, depth, inner)
	}
	return b
}

// appendValue writes v, a struct's or a list's body being inner bytes long.
func appendValue(b []byte, v *structpb.Value, depth, inner int) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		b = protowire.AppendTag(b, valueNull, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		b = protowire.AppendTag(b, valueNumber, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		b = protowire.AppendTag(b, valueString, protowire.BytesType)
		b = protowire.AppendString(b, k.StringValue)
	case *structpb.Value_BoolValue:
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		b = protowire.AppendTag(b, valueStruct, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(inner))
		b = appendStruct(b, k.StructValue, depth+1)
	case *structpb.Value_ListValue:
		b = protowire.AppendTag(b, valueList, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(inner))
		for _, e := range k.ListValue.GetValues() {
			vs, n, _ := valueSize(e, depth+1)
			b = protowire.AppendTag(b, listValues, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(vs))
			b = appendValue(b, e, depth+1, n)
		}
	}
	return b
}
