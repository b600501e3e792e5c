// Package bench measures the per-request cost of Tollgate's gRPC servers —
// ext_authz and both ext_proc steps — by playing Envoy's exact message
// sequence against them over real gRPC on loopback. Run it with
// `make bench`.
package bench
