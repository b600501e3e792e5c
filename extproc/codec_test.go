package extproc

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/store"
)

// forwarded is the metadata Envoy forwards with every message of the
// upstream step: the router step's signed state.
func forwarded(t *testing.T) *corev3.Metadata {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{"key_id": "key_1", "account_id": "acct_1", "request_id": "req_1",
		"model": "gpt-4o-mini", "stream": true, "held": "0.0001", "sig": "c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU="})
	require.NoError(t, err)
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.RequestMetadataNamespace: s}}
}

// TestTheCodecReadsForwardedMetadataOnlyOnRequestHeaders: the upstream
// step reads Envoy's forwarded metadata on the request headers; on every
// other message (each chunk of a streamed answer) it is left unread, and
// the rest of the message reads as protobuf reads it.
func TestTheCodecReadsForwardedMetadataOnlyOnRequestHeaders(t *testing.T) {
	meta := forwarded(t)
	attrs := map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{"x": structpb.NewStringValue("y")}}}
	tests := []struct {
		name     string
		msg      *extprocv3.ProcessingRequest
		keepMeta bool
	}{
		{name: "request headers keep it", keepMeta: true, msg: &extprocv3.ProcessingRequest{
			Request:         &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headerList(":path", "/v1/chat/completions")}},
			MetadataContext: meta, Attributes: attrs}},
		{name: "a request body leaves it", msg: &extprocv3.ProcessingRequest{
			Request:         &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{"a":1}`), EndOfStream: true}},
			MetadataContext: meta}},
		{name: "a streamed chunk leaves it, and what follows it is read", msg: &extprocv3.ProcessingRequest{
			Request:         &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(chunkHello)}},
			MetadataContext: meta, Attributes: attrs, ObservabilityMode: true}},
		{name: "response headers leave it", msg: &extprocv3.ProcessingRequest{
			Request:         &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerList(":status", "200")}},
			MetadataContext: meta}},
		{name: "a message without it is read whole", keepMeta: true, msg: &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(chunkEnd), EndOfStream: true}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.msg)
			require.NoError(t, err)
			var got extprocv3.ProcessingRequest
			require.NoError(t, Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got))
			want := proto.Clone(tt.msg).(*extprocv3.ProcessingRequest)
			if !tt.keepMeta {
				want.MetadataContext = nil
			}
			assert.True(t, proto.Equal(want, &got), "want %v\ngot %v", want, &got)
		})
	}
}

// TestTheCodecReadsOtherMessagesAsProtobufDoes: a check, and a message
// protobuf refuses, are protobuf's business.
func TestTheCodecReadsOtherMessagesAsProtobufDoes(t *testing.T) {
	var req extprocv3.ProcessingRequest
	assert.Error(t, Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x2a, 0x05, 0x01})}, &req), "a truncated field")
	hc := &corev3.HeaderValue{Key: "a", Value: "b"}
	b, err := proto.Marshal(hc)
	require.NoError(t, err)
	var got corev3.HeaderValue
	require.NoError(t, Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got))
	assert.Equal(t, "b", got.GetValue())
}

// TestAStreamedChunkDecodesWithoutTheForwardedMetadata: decoding a chunk's
// message allocates a few times (the message, its body), not once per
// forwarded field.
func TestAStreamedChunkDecodesWithoutTheForwardedMetadata(t *testing.T) {
	b, err := proto.Marshal(&extprocv3.ProcessingRequest{
		Request:         &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(chunkHello)}},
		MetadataContext: forwarded(t)})
	require.NoError(t, err)
	decode := func(un func([]byte, *extprocv3.ProcessingRequest) error) float64 {
		return testing.AllocsPerRun(100, func() {
			var req extprocv3.ProcessingRequest
			if err := un(b, &req); err != nil {
				t.Fatal(err)
			}
		})
	}
	whole := decode(func(b []byte, m *extprocv3.ProcessingRequest) error { return proto.Unmarshal(b, m) })
	lean := decode(unmarshalRequest)
	t.Logf("allocations per chunk: %.0f with the metadata, %.0f without", whole, lean)
	assert.LessOrEqual(t, lean, 4.0)
}

// frames splits b as gRPC's transport hands a message over: one buffer per
// HTTP/2 DATA frame of at most 16 KiB.
func frames(b []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		s = append(s, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return s
}

// TestALargeMessageTakesABufferOfItsSize: a message larger than a frame is
// gathered, and a large answer marshaled, into a buffer at most twice its
// size (gRPC's default pool hands out a cleared MiB for anything between
// 32 KiB and 1 MiB), and both read back as protobuf reads them.
func TestALargeMessageTakesABufferOfItsSize(t *testing.T) {
	for _, size := range []int{100, 20 << 10, 40 << 10, 300 << 10, 3 << 20} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		req := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}
		b, err := proto.Marshal(req)
		require.NoError(t, err)

		in := gather(frames(b))
		assert.Equal(t, b, in.ReadOnlyData())
		assert.LessOrEqual(t, cap(in.ReadOnlyData()), max(2*len(b), 16<<10), "%d bytes gathered", len(b))
		in.Free()
		var got extprocv3.ProcessingRequest
		require.NoError(t, Codec().Unmarshal(frames(b), &got))
		assert.True(t, proto.Equal(req, &got), "%d bytes read", len(b))

		resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}}}}}
		out, err := Codec().Marshal(resp)
		require.NoError(t, err)
		require.Len(t, out, 1)
		assert.LessOrEqual(t, cap(out[0].ReadOnlyData()), max(2*out.Len(), 1<<10), "a %d-byte answer marshaled", out.Len())
		var back extprocv3.ProcessingResponse
		require.NoError(t, proto.Unmarshal(out.Materialize(), &back))
		assert.True(t, proto.Equal(resp, &back), "a %d-byte answer reads back", out.Len())
		out.Free()
	}
}

// TestTheCodecWritesDynamicMetadataAsProtobufDoes: the codec writes an
// answer's dynamic metadata itself (structwire.go); what it writes reads
// back as the answer it was given, at the size protobuf gives it, for the
// servers' own metadata and for random Structs of every kind of value,
// nested, large and small; the answer keeps its metadata.
func TestTheCodecWritesDynamicMetadataAsProtobufDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 39))
	hand := handover{keyID: "key_1", accountID: "acct_1", requestID: "req_1", modelID: "gpt-4o-mini", stream: true,
		started: time.Unix(1700000000, 0), leaseID: "lease_1", held: 1234, endpointState: "state", tokensHeld: 99, expires: time.Unix(1700000100, 0)}
	metas := []*structpb.Struct{
		hand.encode([]byte("step-key")),
		hand.encode(nil),
		usageMetadata(store.UsageRecord{KeyID: "key_1", Endpoint: "chat", Model: "gpt-4o-mini", Provider: "openai", PromptTokens: 20, CompletionTokens: 7}),
		{},
		{Fields: map[string]*structpb.Value{"": {}}},
	}
	for range 300 {
		metas = append(metas, randomStruct(rng, 0))
	}
	body := &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
		ClearRouteCache: true, BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(`{"model":"m"}`)}}}}}
	for i, meta := range metas {
		for _, msg := range []proto.Message{
			&extprocv3.ProcessingResponse{Response: body, DynamicMetadata: meta, ModeOverride: &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}},
			&authv3.CheckResponse{Status: &rpcstatus.Status{}, DynamicMetadata: meta},
		} {
			want := proto.Clone(msg)
			out, err := Codec().Marshal(msg)
			require.NoError(t, err)
			assert.Equal(t, proto.Size(want), out.Len(), "metadata %d: the size protobuf gives it", i)
			back := want.ProtoReflect().New().Interface()
			require.NoError(t, proto.Unmarshal(out.Materialize(), back))
			assert.True(t, proto.Equal(want, back), "metadata %d reads back as %v", i, meta)
			assert.True(t, proto.Equal(want, msg), "metadata %d: the answer keeps it", i)
			out.Free()
		}
	}
}

// TestTheCodecRefusesMetadataProtobufRefuses: a string that is not UTF-8,
// a key or a value, fails the answer as protobuf's encoder does, and the
// answer is left as it was.
func TestTheCodecRefusesMetadataProtobufRefuses(t *testing.T) {
	deep := &structpb.Struct{}
	for range maxStructDepth + 2 {
		deep = &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStructValue(deep)}}
	}
	for name, meta := range map[string]*structpb.Struct{
		"a value":                           {Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("\xff")}},
		"a key":                             {Fields: map[string]*structpb.Value{"\xfe": structpb.NewBoolValue(true)}},
		"in a list":                         {Fields: map[string]*structpb.Value{"k": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("ok"), structpb.NewStringValue("\xc0")}})}},
		"nested deeper than protobuf reads": deep,
	} {
		t.Run(name, func(t *testing.T) {
			msg := &extprocv3.ProcessingResponse{DynamicMetadata: meta}
			if name != "nested deeper than protobuf reads" {
				_, err := proto.Marshal(msg)
				require.Error(t, err, "protobuf refuses it too")
			}
			_, err := Codec().Marshal(msg)
			require.Error(t, err)
			assert.Same(t, meta, msg.DynamicMetadata)
		})
	}
}

// randomStruct is a Struct of up to six fields of every kind of Value,
// nested up to three deep, its strings sometimes long enough to take the
// codec's pooled buffers.
func randomStruct(rng *rand.Rand, depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for range rng.IntN(7) {
		s.Fields[randomString(rng)] = randomValue(rng, depth)
	}
	return s
}

func randomValue(rng *rand.Rand, depth int) *structpb.Value {
	kinds := 5
	if depth < 3 {
		kinds = 7
	}
	switch rng.IntN(kinds) {
	case 0:
		return structpb.NewNullValue()
	case 1:
		return structpb.NewNumberValue([]float64{0, -1, 1.5, 1e300, math.Inf(-1), float64(rng.Int64())}[rng.IntN(6)])
	case 2:
		return structpb.NewStringValue(randomString(rng))
	case 3:
		return structpb.NewBoolValue(rng.IntN(2) == 0)
	case 4:
		return &structpb.Value{}
	case 5:
		return structpb.NewStructValue(randomStruct(rng, depth+1))
	default:
		l := &structpb.ListValue{}
		for range rng.IntN(4) {
			l.Values = append(l.Values, randomValue(rng, depth+1))
		}
		return structpb.NewListValue(l)
	}
}

func randomString(rng *rand.Rand) string {
	n := []int{0, 1, 8, 130, 2000}[rng.IntN(5)]
	b := make([]rune, n)
	for i := range b {
		b[i] = []rune("aé€😀 z")[rng.IntN(6)]
	}
	return string(b)
}
