package envoy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	// Every extension the YAML files name by @type, so protojson can
	// resolve it (and a typo or an unknown extension fails the test).
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// yamlDocs reads every YAML document in a file as generic values.
func yamlDocs(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
}

// decodeInto turns a generic YAML value into a proto message the way Envoy
// reads its YAML: as proto3 JSON, unknown fields rejected, every Any
// resolved.
func decodeInto(v any, m proto.Message) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{}.Unmarshal(j, m)
}

// validateDeep runs ValidateAll on m and on every message packed in an Any
// anywhere inside it (ValidateAll itself stops at an Any), and returns the
// type URLs it unpacked.
func validateDeep(m proto.Message) ([]string, error) {
	var seen []string
	var walk func(path string, m protoreflect.Message) error
	walk = func(path string, m protoreflect.Message) error {
		if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("%s (%s): %w", path, m.Descriptor().FullName(), err)
			}
		}
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			seen = append(seen, a.GetTypeUrl())
			return walk(path+"<"+string(inner.ProtoReflect().Descriptor().Name())+">", inner.ProtoReflect())
		}
		var err error
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len() && err == nil; i++ {
					err = walk(fmt.Sprintf("%s[%d]", p, i), v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = walk(fmt.Sprintf("%s[%v]", p, k.Interface()), mv.Message())
					return err == nil
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				err = walk(p, v.Message())
			}
			return err == nil
		})
		return err
	}
	return seen, walk("", m.ProtoReflect())
}

// field walks a generic YAML value by map keys and list indexes.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
