package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHealthcheckSucceedsOnlyOnA200(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	if err := Run(context.Background(), []string{"healthcheck", ok.URL}, io.Discard, io.Discard); err != nil {
		t.Errorf("a 200: %v", err)
	}
	if err := Run(context.Background(), []string{"healthcheck", down.URL}, io.Discard, io.Discard); err == nil {
		t.Error("a 503 passed")
	}
	if err := Run(context.Background(), []string{"healthcheck"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Errorf("no URL: %v", err)
	}
}
