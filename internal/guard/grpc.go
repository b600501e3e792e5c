package guard

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor recovers a panic of a unary call (the ext_authz
// Check), counted under where, and fails the call with codes.Internal: the
// proxy then fails closed, as for any error of the check.
func UnaryServerInterceptor(where string, log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
		defer Recover(where, log, func(*Panic) string {
			resp, err = nil, status.Error(codes.Internal, "internal error")
			return ""
		})
		return next(ctx, req)
	}
}

// StreamServerInterceptor recovers a panic of a streaming call, counted
// under where, and fails the stream with codes.Internal. The ext_proc
// steps recover their own panics (they also answer and record the
// request); this is the net under the rest of a stream's handler.
func StreamServerInterceptor(where string, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) (err error) {
		defer Recover(where, log, func(*Panic) string {
			err = status.Error(codes.Internal, "internal error")
			return ""
		})
		return next(srv, ss)
	}
}
