package helm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	yamlv3 "gopkg.in/yaml.v3"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite envoy/mesh/*.yaml from the chart")

// The chart, and the release every test renders (the mesh examples assume
// Service names and a namespace of "tollgate").
const (
	chartDir  = "tollgate"
	release   = "tollgate"
	namespace = "tollgate"
	repoRoot  = "../.."
)

// required are the values an install cannot do without.
func required() map[string]any {
	return map[string]any{
		"database": map[string]any{"url": "postgres://tollgate:secret@db:5432/tollgate"},
		"redis":    map[string]any{"url": "redis://redis:6379/0"},
	}
}

// with returns required() plus the values given as dotted paths.
func with(kv ...any) map[string]any {
	v := required()
	for i := 0; i < len(kv); i += 2 {
		path := strings.Split(kv[i].(string), ".")
		m := v
		for _, p := range path[:len(path)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[path[len(path)-1]] = kv[i+1]
	}
	return v
}

// render renders the chart as `helm install` would (strict: a value a
// template names that values.yaml lacks is an error), keyed by template
// path with empty outputs dropped.
func render(vals map[string]any) (map[string]string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	top, err := chartutil.ToRenderValues(chrt, vals, common.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, common.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := engine.Engine{Strict: true, LintMode: false}.Render(chrt, top)
	if err != nil {
		return nil, err
	}
	for k, v := range out {
		if strings.TrimSpace(v) == "" || strings.HasSuffix(k, "NOTES.txt") {
			delete(out, k)
		}
	}
	return out, nil
}

func mustRender(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	out, err := render(vals)
	require.NoError(t, err)
	return out
}

// object is one rendered Kubernetes object, decoded into its API type.
type object struct {
	file string
	gvk  schema.GroupVersionKind
	name string
	obj  any
}

// decodeAll decodes every document of every rendered file strictly into
// its API type: an unknown kind, an unknown field or a duplicate field fails.
func decodeAll(t *testing.T, rendered map[string]string) []object {
	t.Helper()
	files := make([]string, 0, len(rendered))
	for f := range rendered {
		files = append(files, f)
	}
	sort.Strings(files)
	var objs []object
	seen := map[string]bool{}
	for _, f := range files {
		for i, doc := range splitDocs(t, rendered[f]) {
			o, err := decodeStrict(doc)
			require.NoError(t, err, "%s, document %d:\n%s", f, i, doc)
			o.file = f
			id := o.gvk.Kind + "/" + o.name
			require.False(t, seen[id], "%s rendered twice", id)
			seen[id] = true
			objs = append(objs, o)
		}
	}
	return objs
}

// splitDocs splits a rendered file into its YAML documents, dropping empty
// ones.
func splitDocs(t *testing.T, s string) [][]byte {
	t.Helper()
	dec := yamlv3.NewDecoder(strings.NewReader(s))
	var docs [][]byte
	for {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, "YAML:\n%s", s)
		var v any
		require.NoError(t, n.Decode(&v))
		if v == nil {
			continue
		}
		b, err := yamlv3.Marshal(&n)
		require.NoError(t, err)
		docs = append(docs, b)
	}
}

// decodeStrict decodes one document into the Go type of its apiVersion
// and kind.
func decodeStrict(doc []byte) (object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal(doc, &head); err != nil {
		return object{}, err
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return object{}, err
	}
	gvk := gv.WithKind(head.Kind)
	o := object{gvk: gvk, name: head.Metadata.Name}
	if head.Metadata.Name == "" {
		return o, fmt.Errorf("%s without a name", gvk)
	}
	if spec, ok := protoSpecs[gvk]; ok {
		o.obj, err = decodeProtoSpec(doc, spec())
		return o, err
	}
	var into any
	if mk, ok := apiTypes[gvk]; ok {
		into = mk()
	} else if obj, err := scheme.Scheme.New(gvk); err == nil {
		into = obj
	} else {
		return o, fmt.Errorf("no API type known for %s", gvk)
	}
	if err := sigsyaml.UnmarshalStrict(doc, into); err != nil {
		return o, fmt.Errorf("%s %s: %w", gvk.Kind, o.name, err)
	}
	o.obj = into
	return o, nil
}

// decodeProtoSpec decodes a custom resource whose spec is a protobuf
// message (Istio's): the envelope strictly as JSON, the spec as proto3 JSON
// with unknown fields rejected (Istio's own JSON decoders allow them).
func decodeProtoSpec(doc []byte, spec proto.Message) (proto.Message, error) {
	var env struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   json.RawMessage `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
	}
	if err := sigsyaml.UnmarshalStrict(doc, &env); err != nil {
		return nil, err
	}
	var meta struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	dec := json.NewDecoder(bytes.NewReader(env.Metadata))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(env.Spec, spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return spec, nil
}

// find returns the rendered object of kind and name, or fails.
func find(t *testing.T, objs []object, kind, name string) any {
	t.Helper()
	for _, o := range objs {
		if o.gvk.Kind == kind && o.name == name {
			return o.obj
		}
	}
	t.Fatalf("no %s %q rendered", kind, name)
	return nil
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.gvk.Kind+"/"+o.name)
	}
	sort.Strings(out)
	return out
}

func readRepo(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err)
	return string(b)
}
