package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A page of large entries stops at listPageBytes, shorter than its limit, with a
// cursor from its last entry: 500 payloads of megabytes are not held at once, and
// the pages still list every entry once, in order.
func TestListPageBoundedByBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	const n, size = 40, 1 << 20
	blob := strings.Repeat("x", size)
	for i := range n {
		if err := AppendAlone(ctx, pool, Entry{Actor: Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-0000000000a1", Name: "alice"},
			Action: "server.update", TargetType: "server", TargetID: fmt.Sprint(i), Payload: map[string]any{"template": blob}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	want := int64(n)
	pages := 0
	for cursor := int64(0); ; pages++ {
		p, err := l.List(ctx, Filter{Limit: MaxLimit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 0 { // the page after one cut at the bound may be empty
			if p.NextCursor != 0 {
				t.Fatalf("page %d: empty, with a next cursor", pages)
			}
			break
		}
		held := 0
		for _, r := range p.Items {
			if r.ID != want {
				t.Fatalf("page %d: entry %d, want %d (every entry once, newest first)", pages, r.ID, want)
			}
			want--
			held += recordSize(r)
		}
		if last := p.Items[len(p.Items)-1]; held-recordSize(last) >= listPageBytes {
			t.Fatalf("page %d: %d entries of %d KiB, went on past %d KiB", pages, len(p.Items), held>>10, listPageBytes>>10)
		}
		if p.NextCursor == 0 {
			break
		}
		if p.NextCursor != p.Items[len(p.Items)-1].ID {
			t.Fatalf("page %d: next cursor %d, want its last entry's id %d", pages, p.NextCursor, p.Items[len(p.Items)-1].ID)
		}
		cursor = p.NextCursor
	}
	if want != 0 || pages < n*size/listPageBytes {
		t.Fatalf("%d pages listed down to entry %d; want every entry, in about %d pages", pages+1, want+1, n*size/listPageBytes)
	}
}
