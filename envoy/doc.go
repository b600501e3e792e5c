// Package envoy holds Tollgate's production Envoy configuration: the
// bootstrap (envoy.yaml) that puts ext_authz and the two ext_proc steps in
// front of the providers, the service-mesh examples (mesh/), and the tests
// that decode them into Envoy's own protos and hold them, the docker compose
// file and the deployment config to the routing contract (package contract).
// The dynamic half, the model clusters, is package xds.
package envoy
