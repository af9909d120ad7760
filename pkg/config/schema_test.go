package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The JSON Schema of the cloud config, for editors (yaml-language-server
// and the like) to complete and flag fields, is generated from the types
// and their comments here; the test fails when the checked-in file is not
// what the types make: go test ./pkg/config -run TestSchema -update.
var update = flag.Bool("update", false, "write "+schemaFile)

const schemaFile = "../../deploy/cloud-config.schema.json"

func TestSchemaFileIsWhatTheTypesMake(t *testing.T) {
	docs, err := fieldDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	schema := typeSchema(reflect.TypeOf(Config{}), docs)
	schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	schema["title"] = "cloud config of baremetal-cloud-controller-manager"
	schema["description"] = "The file given to --cloud-config (docs/reference/config.md). Generated from pkg/config's types."
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(schemaFile)
	if err != nil || !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("%s is not what the types make (%v): run go test ./pkg/config -run TestSchema -update", filepath.Clean(schemaFile), err)
	}
}

// enums are the values of the config's string types.
var enums = map[reflect.Type][]string{
	reflect.TypeOf(UnlistedReject): {string(UnlistedReject), string(UnlistedAllow)},
	reflect.TypeOf(PowerOn):        {string(PowerOn), string(PowerOff)},
	reflect.TypeOf(BMCIPMI):        {string(BMCIPMI), string(BMCRedfish)},
	reflect.TypeOf(AnnounceBGP):    {string(AnnounceBGP), string(AnnounceL2), string(AnnounceNone)},
	reflect.TypeOf(AddressInternalIP): {string(AddressInternalIP), string(AddressExternalIP), string(AddressHostname),
		string(AddressInternalDNS), string(AddressExternalDNS)},
}

func typeSchema(t reflect.Type, docs map[string]string) map[string]any {
	if vals, ok := enums[t]; ok {
		return map[string]any{"type": "string", "enum": vals}
	}
	if t == reflect.TypeOf(Duration{}) {
		return map[string]any{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`, "description": "a duration such as 90s or 1m30s"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem(), docs)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": uint64(1)<<t.Bits() - 1}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), docs)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), docs)}
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			s := typeSchema(f.Type, docs)
			if d := docs[t.Name()+"."+f.Name]; d != "" {
				s["description"] = d
			}
			props[name] = s
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	}
	panic("no schema for " + t.String())
}

// fieldDocs are the comments of the struct fields declared in dir, by
// "Type.Field".
func fieldDocs(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				text := strings.Join(strings.Fields(field.Doc.Text()+" "+field.Comment.Text()), " ")
				for _, name := range field.Names {
					if text != "" {
						out[ts.Name.Name+"."+name.Name] = text
					}
				}
			}
			return false
		})
	}
	return out, nil
}
