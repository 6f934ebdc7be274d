package mcpclient_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's result cache of a 2026-07-28 session keeps only results it may answer from
// (a time to live): 64 reads of distinct half-megabyte resources that have none leave
// nothing behind (third_party/go-sdk/TOOLWARDEN.md). Not parallel: it measures the heap.
func TestSDKCacheKeepsNothingUncacheable(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	body := strings.Repeat("x", 512<<10)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://big/{n}", Name: "big"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: body}}}, nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cache-test", Version: "1"}, nil).Connect(ctx, ct,
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28 (the era with the cache)", v)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 64 {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://big/" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Fatalf("64 reads of 512 KiB left %d MiB on the heap: the SDK keeps results it never answers from", grown>>20)
	}
}
