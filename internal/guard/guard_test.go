package guard

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func bufLogger() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewJSONHandler(&b, nil)), &b
}

func TestRecoverCountsHandlesAndLogsWithTheStack(t *testing.T) {
	log, buf := bufLogger()
	before := CountOf("test_recover")
	var got *Panic
	func() {
		defer Recover("test_recover", log, func(p *Panic) string { got = p; return "req-1" })
		var m map[string]int
		//lint:ignore SA5000 the runtime panic is what the test needs
		m["x"] = 1
	}()
	require.NotNil(t, got)
	assert.Equal(t, "test_recover", got.Where)
	assert.Equal(t, before+1, CountOf("test_recover"))
	out := buf.String()
	assert.Contains(t, out, `"level":"ERROR"`)
	assert.Contains(t, out, `"request_id":"req-1"`)
	assert.Contains(t, out, "guard_test.go", "the stack names the panicking code")
	assert.Contains(t, out, "assignment to entry in nil map")
}

func TestAPanicInTheHandlerIsRecoveredToo(t *testing.T) {
	log, buf := bufLogger()
	before := CountOf("test_handler_panics")
	assert.NotPanics(t, func() {
		defer Recover("test_handler_panics", log, func(*Panic) string { panic("again") })
		panic("first")
	})
	assert.Equal(t, before+2, CountOf("test_handler_panics"))
	assert.Contains(t, buf.String(), "panic while answering a recovered panic")
}

func TestRecoverLetsNetHTTPsAbortThrough(t *testing.T) {
	assert.PanicsWithValue(t, http.ErrAbortHandler, func() {
		defer Recover("test_abort", nil, nil)
		panic(http.ErrAbortHandler)
	})
	assert.Zero(t, CountOf("test_abort"))
}

func TestGoRecoversTheGoroutine(t *testing.T) {
	done := make(chan struct{})
	before := CountOf("test_go")
	Go("test_go", slog.New(slog.DiscardHandler), func() {
		defer close(done)
		panic("in a goroutine")
	})
	<-done
	require.Eventually(t, func() bool { return CountOf("test_go") == before+1 }, 5e9, 1e6)
}

func TestHandlerAnswers500BeforeTheResponseBegins(t *testing.T) {
	h := Handler("test_http", slog.New(slog.DiscardHandler), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))
	rw := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/v1/keys", nil)
	r.Header.Set("x-request-id", "req-9")
	h.ServeHTTP(rw, r)
	assert.Equal(t, 500, rw.Code)
	assert.Equal(t, "application/json", rw.Header().Get("Content-Type"))
	assert.Contains(t, rw.Body.String(), `"code":"internal_error"`)
	assert.Contains(t, rw.Body.String(), "req-9")
	assert.NotContains(t, rw.Body.String(), "boom", "the panic is not the client's business")
}

func TestHandlerCutsAResponseThatBegan(t *testing.T) {
	h := Handler("test_http_started", nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("half"))
		panic("boom")
	}))
	before := CountOf("test_http_started")
	assert.PanicsWithValue(t, http.ErrAbortHandler, func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	})
	assert.Equal(t, before+1, CountOf("test_http_started"))
}

func TestInterceptorsFailTheCallWithInternal(t *testing.T) {
	_, err := UnaryServerInterceptor("test_unary", nil)(context.Background(), nil, &grpc.UnaryServerInfo{},
		func(context.Context, any) (any, error) { panic("check") })
	assert.Equal(t, codes.Internal, status.Code(err))
	err = StreamServerInterceptor("test_stream", nil)(nil, nil, &grpc.StreamServerInfo{},
		func(any, grpc.ServerStream) error { panic("process") })
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Equal(t, int64(1), CountOf("test_unary"))
	assert.Equal(t, int64(1), CountOf("test_stream"))
	var names []string
	for _, c := range Counts() {
		names = append(names, c.Where)
	}
	assert.True(t, strings.Contains(strings.Join(names, ","), "test_stream,test_unary"), "%v", names)
}
