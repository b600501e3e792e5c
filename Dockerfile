# syntax=docker/dockerfile:1

# Build a static tollgate binary (pure Go: the SQLite driver needs no cgo).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/tollgate ./cmd/tollgate

# distroless/static carries the CA bundle (for calls to providers), tzdata
# and a non-root user, and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tollgate /usr/local/bin/tollgate
# The default sqlite://tollgate.db lands somewhere writable.
WORKDIR /home/nonroot
USER nonroot:nonroot
# 8080: the built-in edge's default in a container; 8081: the HTTP listener
# the compose file uses (dashboard and built-in edge); 9001: gRPC for Envoy
# (ext_authz, ext_proc, xDS).
EXPOSE 8080 8081 9001
ENTRYPOINT ["/usr/local/bin/tollgate"]
CMD ["serve", "--config", "/etc/tollgate/config.yaml", "--listen", "0.0.0.0:8080", "--grpc-listen", "0.0.0.0:9001"]
