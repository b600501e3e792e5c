// Package apiclient is a client of the management API generated from its
// OpenAPI document (manage/restapi/openapi.json) by oapi-codegen. The API's tests
// drive every endpoint through it, so the document and the API cannot drift
// apart; regenerate with go generate after changing the document.
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../openapi.json
