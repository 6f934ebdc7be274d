package router

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/schema"
)

// gatedCompile compiles for real, but a schema containing "slow" waits for release
// first, and started is closed when it begins waiting.
func gatedCompile(calls *atomic.Int32, started chan struct{}, release <-chan struct{}) func(json.RawMessage) (*jsonschema.Schema, error) {
	var once sync.Once
	return func(raw json.RawMessage) (*jsonschema.Schema, error) {
		calls.Add(1)
		if strings.Contains(string(raw), "slow") {
			once.Do(func() { close(started) })
			<-release
		}
		return schema.CompileSchema(raw)
	}
}

func TestSchemaCacheSlowCompileDoesNotBlockOthers(t *testing.T) {
	c := newCache(true)
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	c.compile = gatedCompile(&calls, started, release)
	defer close(release)

	go c.schema("h1", "in", json.RawMessage(`{"type":"object","description":"slow"}`))
	<-started

	done := make(chan error, 1)
	go func() {
		s, err := c.schema("h2", "in", json.RawMessage(`{"type":"object"}`))
		if err == nil && s == nil {
			err = fmt.Errorf("no schema")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another schema's lookup waited for a slow compile")
	}
}

func TestSchemaCacheConcurrentLookupsCompileOnce(t *testing.T) {
	c := newCache(true)
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	c.compile = gatedCompile(&calls, started, release)
	raw := json.RawMessage(`{"type":"object","description":"slow"}`)

	const n = 16
	got := make([]*jsonschema.Schema, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got[0], _ = c.schema("h", "in", raw) }()
	<-started // the first compile is under way; the rest arrive while it runs
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = c.schema("h", "in", raw) }()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()

	if k := calls.Load(); k != 1 {
		t.Fatalf("compiled %d times, want 1", k)
	}
	for i, s := range got {
		if s == nil || s != got[0] {
			t.Fatalf("caller %d got %p, want the one compiled schema %p", i, s, got[0])
		}
	}
}

func TestSchemaCacheByteBoundEvictsOldest(t *testing.T) {
	c := newCache(true)
	var calls atomic.Int32
	c.compile = func(raw json.RawMessage) (*jsonschema.Schema, error) {
		calls.Add(1)
		return schema.CompileSchema(raw)
	}
	raw := func(i int) json.RawMessage { // 40 bytes each
		return json.RawMessage(fmt.Sprintf(`{"type":"object","description":"%09d"}`, i))
	}
	c.maxBytes = 100
	for i := range 3 {
		if _, err := c.schema(fmt.Sprint("h", i), "in", raw(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.sbytes > c.maxBytes || len(c.schemas) != 2 {
		t.Fatalf("holds %d schemas, %d bytes; want 2 within %d", len(c.schemas), c.sbytes, c.maxBytes)
	}
	if _, ok := c.schemas["h0/in"]; ok {
		t.Fatal("the oldest schema was not evicted")
	}
	for _, k := range []string{"h1/in", "h2/in"} {
		if _, ok := c.schemas[k]; !ok {
			t.Fatalf("%s was evicted; only the oldest should be", k)
		}
	}
	before := calls.Load()
	c.schema("h2", "in", raw(2))
	if calls.Load() != before {
		t.Fatal("a held schema was compiled again")
	}
	c.schema("h0", "in", raw(0))
	if calls.Load() != before+1 {
		t.Fatal("an evicted schema was not compiled again")
	}

	// One schema larger than the whole bound is compiled but not kept.
	big := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", 200) + `"}`)
	if s, err := c.schema("big", "in", big); err != nil || s == nil {
		t.Fatalf("big schema: %v", err)
	}
	if _, ok := c.schemas["big/in"]; ok || c.sbytes > c.maxBytes {
		t.Fatalf("kept a schema over the bound (%d bytes held)", c.sbytes)
	}

	// The count bound holds too.
	c.maxBytes, c.maxCount = 1<<20, 2
	for i := 10; i < 15; i++ {
		c.schema(fmt.Sprint("h", i), "in", raw(i))
	}
	if len(c.schemas) != 2 || len(c.order) != 2 {
		t.Fatalf("holds %d schemas (%d ordered), want 2", len(c.schemas), len(c.order))
	}
}
