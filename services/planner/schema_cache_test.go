package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// cacheTools are n tools that all fit "get thing", each with a schema of its own (tag
// makes them new to the process) whose enum has values values.
func cacheTools(tag string, n, values int) []Tool {
	vs := make([]string, values)
	for i := range vs {
		vs[i] = fmt.Sprintf("value_%d", i)
	}
	enum, _ := json.Marshal(vs)
	tools := make([]Tool, n)
	for i := range tools {
		tools[i] = Tool{
			Name: fmt.Sprintf("srv%d__get_thing_%d", i, i),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","description":"%s %d","properties":{"kind":{"type":"string","enum":%s},"count":{"type":"integer"}},"required":["kind"]}`,
				tag, i, enum)),
		}
	}
	return tools
}

// mallocs is how many allocations f makes (the whole process's: not parallel).
func mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// A prompt does not decode again the schemas an earlier prompt over the same tools
// decoded. Counted in allocations, which do not vary from run to run as time does.
func TestSchemaReadOncePerProcess(t *testing.T) {
	tools := cacheTools(fmt.Sprint(rand.Uint64()), 200, 50)
	prompt := "get thing " + strings.Repeat("zz ", 20)
	plan := func() { _, _ = NewRules().Plan(context.Background(), prompt, tools) }
	first, second := mallocs(plan), mallocs(plan)
	if second*2 > first {
		t.Errorf("a second prompt over the same 200 schemas allocates %d times, the first %d: each prompt decodes every schema again", second, first)
	}
}

// A cached schema reads as a fresh one does: enum values (strings only), the types of
// "type" lists, anyOf/oneOf, enums and consts, required parameters first in the
// schema's order; and a schema that cannot be read gives nothing.
func TestSchemaCacheSameAsFreshRead(t *testing.T) {
	cache := &schemaCache{maxEntries: 100, maxBytes: 1 << 20}
	for _, c := range []struct {
		schema string
		params []param
		types  map[string][]string
	}{
		{
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"string","enum":["x","y",3]}},"required":["c","a"]}`,
			[]param{{"a", []string{"string"}, nil, true}, {"c", []string{"string"}, []string{"x", "y"}, true}, {"b", []string{"integer"}, nil, false}},
			map[string][]string{"a": {"string"}, "b": {"integer"}, "c": {"string"}},
		},
		{
			`{"properties":{"n":{"anyOf":[{"type":"integer"},{"type":"null"}]},"m":{"type":["number","string"]},"e":{"enum":[1,"a",true]},"k":{"const":"fixed"},"o":{"oneOf":[{"anyOf":[{"type":"boolean"}]},{"type":"integer"}]},"u":{}},"required":["u"]}`,
			[]param{{"u", nil, nil, true}, {"n", []string{"integer", "null"}, nil, false}, {"m", []string{"number", "string"}, nil, false},
				{"e", []string{"number", "string", "boolean"}, []string{"a"}, false}, {"k", []string{"string"}, nil, false}, {"o", []string{"boolean", "integer"}, nil, false}},
			map[string][]string{"n": {"integer", "null"}, "m": {"number", "string"}, "e": {"number", "string", "boolean"}, "k": {"string"}, "o": {"boolean", "integer"}},
		},
		{`{"type":"object"}`, nil, map[string][]string{}},
		{`{"properties":`, nil, map[string][]string{}},
	} {
		raw := []byte(c.schema)
		first := cache.get(raw)
		if again := cache.get([]byte(c.schema)); again != first {
			t.Errorf("%s: a second read decoded it again", c.schema)
		}
		fresh := readSchema(raw)
		if !reflect.DeepEqual(first, fresh) {
			t.Errorf("%s: cached %+v, fresh %+v", c.schema, *first, *fresh)
		}
		if !reflect.DeepEqual(first.params, c.params) || !reflect.DeepEqual(first.types, c.types) {
			t.Errorf("%s: got params %+v types %v, want %+v %v", c.schema, first.params, first.types, c.params, c.types)
		}
		cat := newCatalog([]Tool{{Name: "s__t", InputSchema: raw}})
		if !reflect.DeepEqual(cat.params(0), c.params) || !reflect.DeepEqual(cat.propTypes(0), c.types) {
			t.Errorf("%s: the catalogue gives params %+v types %v, want %+v %v", c.schema, cat.params(0), cat.propTypes(0), c.params, c.types)
		}
	}
}

// Plans that fill parameters leave the cached schemas as they were, and a prompt plans
// the same before and after another, alone or with others at once.
func TestSchemaCacheNotChangedByPlans(t *testing.T) {
	tag := fmt.Sprint(rand.Uint64()) // schemas new to the process
	tools := []Tool{
		{Name: "things__get_thing", InputSchema: json.RawMessage(`{"description":"` + tag + `","properties":{"count":{"type":"integer"},"label":{"type":"string"},"kind":{"type":"string","enum":["alpha","beta","gamma"]}},"required":["kind","label"]}`)},
		{Name: "calc__add", InputSchema: json.RawMessage(`{"description":"` + tag + `","properties":{"a":{"anyOf":[{"type":"number"},{"type":"null"}]},"b":{"type":"number"}},"required":["b","a"]}`)},
	}
	prompts := []struct{ prompt, plan string }{
		{`add 1 and 2 then get thing gamma 'x'`, `{"steps":[{"tool":"calc__add","arguments":{"a":1,"b":2}},{"tool":"things__get_thing","arguments":{"label":"x","kind":"gamma"}}]}`},
		{`get thing beta 'hello' 5`, `{"steps":[{"tool":"things__get_thing","arguments":{"label":"hello","kind":"beta","count":5}}]}`},
	}
	plan := func(prompt string) string {
		p, err := NewRules().Plan(context.Background(), prompt, tools)
		if err != nil {
			return err.Error()
		}
		b, _ := json.Marshal(p)
		return string(b)
	}
	var cached []*schemaInfo
	for _, tool := range tools {
		cached = append(cached, schemas.get(tool.InputSchema))
	}
	check := func(when string) {
		t.Helper()
		for k, tool := range tools {
			if got := schemas.get(tool.InputSchema); got != cached[k] || !reflect.DeepEqual(got, readSchema(tool.InputSchema)) {
				t.Errorf("%s: %s's cached schema is %+v, a fresh read %+v", when, tool.Name, *got, *readSchema(tool.InputSchema))
			}
		}
	}
	for _, p := range append(prompts, prompts[0]) {
		if got := plan(p.prompt); got != p.plan {
			t.Errorf("%q: got %s, want %s", p.prompt, got, p.plan)
		}
		check("after " + p.prompt)
	}
	var wg sync.WaitGroup
	got := make([]string, 8)
	for g := range got {
		wg.Go(func() { got[g] = plan(prompts[g%2].prompt) })
	}
	wg.Wait()
	for g := range got {
		if got[g] != prompts[g%2].plan {
			t.Errorf("%q at once with others: got %s, want %s", prompts[g%2].prompt, got[g], prompts[g%2].plan)
		}
	}
	check("after prompts at once")
}

// The cache starts again empty when it would hold more schemas or bytes than its
// bounds, and does not keep a schema larger than all it may hold.
func TestSchemaCacheBounds(t *testing.T) {
	schema := func(i int) []byte { return fmt.Appendf(nil, `{"properties":{"p%d":{"type":"string"}}}`, i) }
	cache := &schemaCache{maxEntries: 2, maxBytes: 1 << 20}
	for i := range 3 {
		cache.get(schema(i))
	}
	if _, ok := cache.m[string(schema(2))]; !ok || len(cache.m) != 1 {
		t.Errorf("over 2 entries: holds %d, want only the last", len(cache.m))
	}

	one := readSchema(schema(0)).size(len(schema(0)))
	cache = &schemaCache{maxEntries: 100, maxBytes: 2*one + one/2}
	for i := range 3 {
		cache.get(schema(i))
	}
	if len(cache.m) != 1 || cache.bytes != one {
		t.Errorf("over %d bytes: holds %d schemas of %d bytes, want 1 of %d", cache.maxBytes, len(cache.m), cache.bytes, one)
	}

	big := fmt.Appendf(nil, `{"properties":{"p":{"type":"string","enum":["%s"]}}}`, strings.Repeat("v", 4*one))
	if got := cache.get(big); len(got.params) != 1 || len(got.params[0].enum) != 1 {
		t.Errorf("a schema larger than the cache: got params %+v, want its one", got.params)
	}
	if _, ok := cache.m[string(big)]; ok || len(cache.m) != 1 {
		t.Errorf("a schema larger than the cache was kept, or emptied it (%d held)", len(cache.m))
	}
}
