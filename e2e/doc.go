// Package e2e runs Tollgate as its users do — `tollgate serve` with a
// configuration file, a real database and real gRPC between the built-in
// edge, ext_authz and ext_proc — and drives it with the official OpenAI Go
// SDK against mock providers started by the tests: internal/mockllm's
// server on a loopback listener, in each provider's wire format
// (mock_test.go).
package e2e
