package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, parses, defaults and validates the cloud-config file at path.
func Load(path string) (*Config, error) {
	cfg, _, err := LoadWithContent(path)
	return cfg, err
}

// Parse parses, defaults and validates a cloud config. Unknown fields and
// values of the wrong type are errors that name the field path.
func Parse(data []byte) (*Config, error) { return parse(data, true) }

// ParseWithoutSecrets is Parse without reading the peers' passwordFile:
// the validate command runs where the Secrets are not (a CI pipeline).
func ParseWithoutSecrets(data []byte) (*Config, error) { return parse(data, false) }

func parse(data []byte, readSecrets bool) (*Config, error) {
	cfg := &Config{}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("the file holds more than one YAML document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		return nil, errors.New("the file is empty")
	}
	errs := checkShape(root, reflect.TypeOf(cfg).Elem(), "")
	if err := checkVersion(root, errs); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := root.Decode(cfg); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	cfg.SetDefaults()
	if err := cfg.validate(readSecrets); err != nil {
		return nil, err
	}
	return cfg, nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// checkShape walks the YAML tree beside the Go type it will be decoded into
// and reports, by field path, every key the type does not have and every
// scalar that does not fit its field.
func checkShape(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		return nil
	}
	at := func() string {
		if path == "" {
			return fmt.Sprintf("(line %d)", n.Line)
		}
		return fmt.Sprintf("%s (line %d)", path, n.Line)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return []error{fmt.Errorf("%s: %v", at(), err)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return []error{fmt.Errorf("%s: must be a mapping", at())}
		}
		fields := yamlFields(t)
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fields[key.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown field %q", join(path, key.Value), key.Value))
				continue
			}
			errs = append(errs, checkShape(val, f.Type, join(path, key.Value))...)
		}
		return errs
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return []error{fmt.Errorf("%s: must be a list", at())}
		}
		var errs []error
		for i, item := range n.Content {
			errs = append(errs, checkShape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return []error{fmt.Errorf("%s: must be a mapping", at())}
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			errs = append(errs, checkShape(val, t.Elem(), fmt.Sprintf("%s[%q]", path, key.Value))...)
		}
		return errs
	default:
		if n.Kind != yaml.ScalarNode {
			return []error{fmt.Errorf("%s: must be a single value, not a %s", at(), kindName(n.Kind))}
		}
		if t.Kind() == reflect.String && n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
			return []error{fmt.Errorf("%s: must be a string", at())}
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			return []error{fmt.Errorf("%s: %q is not a valid %s", at(), n.Value, t.Kind())}
		}
		return nil
	}
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// yamlFields maps the YAML keys of a struct type to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f
	}
	return fields
}

// Line is the line of data (a cloud config) that the field path (as the
// errors name it: "bgp.peers[0].address", a map key as [key] or ["key"])
// leads to; 0 when it leads nowhere.
func Line(data []byte, path string) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for path != "" {
		var seg string
		index := strings.HasPrefix(path, "[")
		if index {
			end := strings.Index(path, "]")
			if end < 0 {
				return 0
			}
			seg, path = path[1:end], path[end+1:]
		} else {
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			seg, path = path[:end], path[end:]
		}
		path = strings.TrimPrefix(path, ".")
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		switch {
		case n.Kind == yaml.SequenceNode && index:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		case n.Kind == yaml.MappingNode:
			if unquoted, err := strconv.Unquote(seg); index && err == nil {
				seg = unquoted
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		default:
			return line
		}
	}
	return line
}

// APIVersion is the newest version of the cloud config this binary reads.
// A release that adds fields names a new version; every binary reads the
// versions up to its own (each only adds to the one before) and refuses a
// newer one, naming what it does not know.
const APIVersion = apiGroup + "v1alpha1"

const apiGroup = "baremetal.cloudprovider.io/"

// readVersions are the versions this binary reads, oldest first.
var readVersions = []string{APIVersion}

// checkVersion refuses a config of a version this binary does not read:
// one written for a newer release (a rollback that kept the newer config),
// with the fields it does not know (unknown, checkShape's errors), or one
// that is not a cloud config of this provider at all.
func checkVersion(root *yaml.Node, shapeErrs []error) error {
	version := ""
	for i := 0; root.Kind == yaml.MappingNode && i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "apiVersion" {
			version = root.Content[i+1].Value
		}
	}
	if version == "" || slices.Contains(readVersions, version) {
		return nil
	}
	if !strings.HasPrefix(version, apiGroup) {
		return fmt.Errorf("apiVersion: %q is not a version of this provider's cloud config (%s)", version, APIVersion)
	}
	var unknown []string
	for _, err := range shapeErrs {
		if strings.Contains(err.Error(), ": unknown field ") {
			unknown = append(unknown, strings.SplitN(err.Error(), ": unknown field ", 2)[0])
		}
	}
	what := "no field it does not know"
	if len(unknown) > 0 {
		what = "fields it does not know: " + strings.Join(unknown, ", ")
	}
	return fmt.Errorf("apiVersion: %q is newer than this binary reads (%s): the config was written for a newer release (%s). Run that release, or go back to the config this release was given (docs/operations/upgrade.md)", version, strings.Join(readVersions, ", "), what)
}
