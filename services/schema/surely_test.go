package schema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSurelyCompiles holds surelyCompiles to its promise: every schema it vouches for
// compiles. The schemas are random trees of the keywords it knows, with values of the
// right type and of wrong ones (a string for a number, a negative count, a repeated
// type, an empty anyOf), unknown keywords and references mixed in; and the schemas of
// the package's test data.
func TestSurelyCompiles(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(23, 5))
	vouched, refused, failing := 0, 0, 0
	check := func(raw []byte) {
		t.Helper()
		root, err := Decode(raw)
		if err != nil {
			return
		}
		_, _, cerr := compileDoc(schemaDoc(root))
		if surelyCompiles(root) {
			vouched++
			if cerr != nil {
				t.Fatalf("surelyCompiles vouched for a schema that does not compile (%v):\n%s", cerr, raw)
			}
			return
		}
		refused++
		if cerr != nil {
			failing++
		}
	}
	for range 20000 {
		check([]byte(randomSchema(r, 0)))
	}
	// Every object in the test data (tool lists, schemas and their parts) is checked too.
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var walk func(any)
		walk = func(v any) {
			switch t := v.(type) {
			case map[string]any:
				b, _ := json.Marshal(t)
				check(b)
				for _, e := range t {
					walk(e)
				}
			case []any:
				for _, e := range t {
					walk(e)
				}
			}
		}
		walk(v)
	}
	// The generator must reach both sides, or the test proves nothing.
	if vouched < 2000 || failing < 2000 {
		t.Fatalf("vouched for %d schemas and refused %d (%d of them do not compile): the generator no longer covers both sides", vouched, refused, failing)
	}
	t.Logf("vouched for %d schemas, refused %d (%d of those do not compile)", vouched, refused, failing)
}

// randomSchema is a schema of mostly right and sometimes wrong keywords.
func randomSchema(r *rand.Rand, depth int) string {
	if depth > 3 || r.IntN(12) == 0 {
		return []string{"true", "false", `{}`, `"string"`, `1`, `null`, `[]`}[r.IntN(7)]
	}
	var parts []string
	for range r.IntN(5) {
		parts = append(parts, randomKeyword(r, depth))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func randomKeyword(r *rand.Rand, depth int) string {
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	num := func() string {
		return pick("0", "1", "-1", "2.5", "1e3", "-0", "1e400", "1e-400", `"1"`, "true", "null", "15", "123456789012345678901", "0.0", "1.0")
	}
	schemas := func(min int) string {
		var s []string
		for range min + r.IntN(3) {
			s = append(s, randomSchema(r, depth+1))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	props := func() string {
		var s []string
		for i := range r.IntN(4) {
			s = append(s, fmt.Sprintf(`"p%d":%s`, i, randomSchema(r, depth+1)))
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	switch k := pick("type", "type", "title", "description", "format", "pattern", "default", "const", "enum",
		"examples", "deprecated", "readOnly", "uniqueItems", "minimum", "maximum", "exclusiveMinimum",
		"multipleOf", "minLength", "maxItems", "minProperties", "required", "properties", "properties",
		"items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "$ref", "$defs", "nullable",
		"dependentRequired", "$schema", "prefixItems", "definitions"); k {
	case "type":
		return `"type":` + pick(`"object"`, `"string"`, `"integer"`, `"strin"`, `["string","null"]`, `["string","string"]`, `[]`, `1`, `["number"]`)
	case "title", "description", "format", "pattern":
		return fmt.Sprintf(`%q:%s`, k, pick(`"x"`, `""`, `"(?=a)"`, `"["`, `1`, `null`, `["a"]`))
	case "default", "const":
		return fmt.Sprintf(`%q:%s`, k, pick(`1`, `"a"`, `{"description":1}`, `null`, `[1,1]`))
	case "enum", "examples":
		return fmt.Sprintf(`%q:%s`, k, pick(`[]`, `[1,1]`, `["a",null]`, `"a"`, `{}`))
	case "deprecated", "readOnly", "uniqueItems":
		return fmt.Sprintf(`%q:%s`, k, pick(`true`, `false`, `"true"`, `0`))
	case "minimum", "maximum", "exclusiveMinimum", "multipleOf", "minLength", "maxItems", "minProperties":
		return fmt.Sprintf(`%q:%s`, k, num())
	case "required":
		return `"required":` + pick(`[]`, `["a"]`, `["a","b"]`, `["a","a"]`, `[1]`, `"a"`, `{}`)
	case "properties":
		return `"properties":` + pick(props(), props(), `[]`, `"x"`, `{"description":"x"}`)
	case "items", "additionalProperties", "not":
		return fmt.Sprintf(`%q:%s`, k, randomSchema(r, depth+1))
	case "anyOf", "oneOf", "allOf", "prefixItems":
		return fmt.Sprintf(`%q:%s`, k, pick(schemas(0), schemas(1), `{}`))
	case "$ref":
		return `"$ref":` + pick(`"#"`, `"#/properties/p0"`, `"#/$defs/missing"`, `"other.json"`)
	case "$defs", "definitions":
		return fmt.Sprintf(`%q:%s`, k, props())
	case "$schema":
		return `"$schema":` + pick(`"https://json-schema.org/draft/2020-12/schema"`, `"http://json-schema.org/draft-07/schema#"`, `"https://example.com/meta"`)
	default:
		return fmt.Sprintf(`%q:%s`, k, pick(`true`, `{"a":["b"]}`, `{"a":"b"}`))
	}
}
