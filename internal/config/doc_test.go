package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestEveryKeyDocumented: every key the decoder accepts is in docs/CONFIG.md,
// the users' reference, as `key` or `table.key`. The keys come from the toml
// tags of the structs the decoder fills, so a key added there without its
// line in the doc fails here.
func TestEveryKeyDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	keys := acceptedKeys(reflect.TypeOf(rawNetwork{}), "")
	if len(keys) < 20 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		table, key, nested := strings.Cut(k, ".")
		if !nested {
			key = table
		}
		if !strings.Contains(doc, "`"+key+"`") && !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("key %s is accepted by the config but not documented in docs/CONFIG.md", k)
		}
		if nested && !strings.Contains(doc, "[["+table+"]]") && !strings.Contains(doc, "["+table+"]") {
			t.Errorf("table %s (of key %s) has no heading in docs/CONFIG.md", table, k)
		}
	}
}

// acceptedKeys lists the keys of a raw decoder struct: the leaves by their
// toml tag, and the keys of nested tables as table.key.
func acceptedKeys(typ reflect.Type, prefix string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, acceptedKeys(ft, tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}
