// Package helm holds the tests of Tollgate's Helm chart (tollgate/): it is a
// module of its own so that Helm's and the Kubernetes, Envoy Gateway and
// Istio API types stay out of the main module's dependencies.
package helm
