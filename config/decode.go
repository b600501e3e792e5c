package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/money"
)

// Load reads and parses the file at path, expanding ${VAR} from the process
// environment.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// envRef matches ${VAR} and ${VAR:-default}.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// Parse decodes and validates a configuration. ${VAR} references in the text
// are expanded with lookup; a reference to an unset variable is an error,
// unless it names a default: ${VAR:-default} (the default may be empty).
// Every error names the field it is about.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, errors.New("config: the file is empty")
	}
	// Expand ${VAR} inside scalars only, so a value with characters YAML
	// treats specially (a '#' or ': ' in a credential) cannot change the
	// document's structure.
	var missing []string
	expandScalars(&doc, func(s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			name, def := m[1], m[2]
			v, ok := lookup(name)
			switch {
			case ok && v != "":
				return v
			case def != "":
				return def[2:] // ${VAR:-default}: unset or empty gives the default
			case ok:
				return v
			}
			missing = append(missing, name)
			return ""
		})
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("config: environment variable %s is not set", strings.Join(missing, ", "))
	}
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.LoadedAt = time.Now().UTC().Truncate(time.Second)
	return &c, nil
}

// expandScalars replaces the value of every scalar under n that holds a
// "${" with f of it.
func expandScalars(n *yaml.Node, f func(string) string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = f(n.Value)
		n.Tag, n.Style = "", 0 // let the expanded text resolve (and quote itself) as YAML would
	}
	for _, c := range n.Content {
		expandScalars(c, f)
	}
}

// unmarshalNanos reads a dollar amount exactly from the scalar's text, so
// 0.15 is 150,000,000 nano-dollars, not a float's neighbour.
func unmarshalNanos(value *yaml.Node) (money.Nanos, error) {
	if value.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("line %d: a price must be a number of dollars", value.Line)
	}
	n, err := money.ParseUSD(value.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %w", value.Line, err)
	}
	return n, nil
}

// modelFields is the field index of each of Model's YAML keys, read from
// its tags: the struct is the one list of a model's fields.
var modelFields = yamlFields(reflect.TypeFor[Model]())

// yamlFields maps each YAML key of the struct type t to its field index.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out[name] = i
		}
	}
	return out
}

// UnmarshalYAML implements yaml.Unmarshaler for Model so prices (its
// money.Nanos fields) are exact dollar amounts, and so a misspelt field is
// an error (Decode does not apply the decoder's KnownFields here, and a
// misspelt price must not be silently free).
func (m *Model) UnmarshalYAML(value *yaml.Node) error {
	type plain Model // Model's fields without this method
	rest := *value
	type price struct {
		field int
		name  string
		node  *yaml.Node
	}
	var prices []price
	if value.Kind == yaml.MappingNode {
		rest.Content = nil
		for i := 0; i+1 < len(value.Content); i += 2 {
			k := value.Content[i]
			f, ok := modelFields[k.Value]
			switch {
			case !ok:
				return fmt.Errorf("line %d: field %s not found in type config.Model", k.Line, k.Value)
			case reflect.TypeFor[Model]().Field(f).Type == reflect.TypeFor[money.Nanos]():
				prices = append(prices, price{f, k.Value, value.Content[i+1]})
			default:
				rest.Content = append(rest.Content, k, value.Content[i+1])
			}
		}
	}
	var p plain
	if err := rest.Decode(&p); err != nil {
		return err
	}
	*m = Model(p)
	fields := reflect.ValueOf(m).Elem()
	given := map[string]bool{}
	for _, pr := range prices {
		n, err := unmarshalNanos(pr.node)
		if err != nil {
			return fmt.Errorf("model %q: %s: %w", m.ID, pr.name, err)
		}
		fields.Field(pr.field).Set(reflect.ValueOf(n))
		given[pr.name] = true
	}
	// An absent price is free, but the cache prices default to the input
	// price.
	if !given["cached_input_price_per_million"] {
		m.CachedInputPricePerMillion = m.InputPricePerMillion
	}
	if !given["cache_write_price_per_million"] {
		m.CacheWritePricePerMillion = m.InputPricePerMillion
	}
	return nil
}

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(value *yaml.Node) error {
	if value.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration must be a string such as \"30s\"", value.Line)
	}
	v, err := time.ParseDuration(value.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (write it as \"30s\", \"2m\" or \"1m30s\")", value.Line, value.Value)
	}
	*d = Duration(v)
	return nil
}
