package mcpclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A list whose server pages without end stops at each of listSome's bounds and says
// which; what it holds meanwhile, as the server sent it, stays near MaxListedBytes
// however little of each item is stored.
func TestListSomeBounds(t *testing.T) {
	lim := listLimits{maxPages: 1 << 30}
	endless := func(desc string) func(context.Context, string) ([]registry.Resource, string, error) {
		n := 0
		return func(context.Context, string) ([]registry.Resource, string, error) {
			n++
			return []registry.Resource{{URI: fmt.Sprintf("test://r/%d", n), Name: "r", Description: desc}}, fmt.Sprintf("c%d", n), nil
		}
	}
	for _, c := range []struct {
		desc      string
		most      int
		why, cost string
	}{
		{"", maxListedExtras, "more than 1000", "count"},
		{strings.Repeat("d", 3<<10), maxStoredList / (3 << 10), "passed 1 MiB", "stored bytes"},
		{strings.Repeat("d", 1<<20), MaxListedBytes >> 20, "more than 32 MiB", "bytes sent"},
	} {
		out, why := listSome(context.Background(), lim, endless(c.desc), shortResource)
		if len(out) == 0 || len(out) > c.most || !strings.Contains(why, c.why) {
			t.Errorf("bounded by %s: kept %d (at most %d), %q", c.cost, len(out), c.most, why)
		}
	}
	// A whole list is kept as it is, and says nothing.
	whole := []registry.Resource{{URI: "test://a", Name: "a", Description: strings.Repeat("d", maxListedText)}}
	out, why := listSome(context.Background(), lim, func(context.Context, string) ([]registry.Resource, string, error) { return whole, "", nil }, shortResource)
	d := registry.Discovery{Resources: out}
	maskListed(secrets.NewMasker(), &d)
	if why != "" || len(d.Resources) != 1 || d.Resources[0] != whole[0] {
		t.Errorf("a whole list: %q, %d kept", why, len(d.Resources))
	}
}

// Masked before it is shortened: a secret that straddles the cut is hidden whole, not
// left in part.
func TestMaskedBeforeShortened(t *testing.T) {
	const secret = "sk-straddles-the-cut-24680"
	desc := strings.Repeat("d", maxListedText-10) + secret + strings.Repeat("e", 100)
	d := registry.Discovery{Resources: []registry.Resource{{URI: "test://a", Description: desc}}}
	maskListed(secrets.NewMasker(secret), &d)
	if got := d.Resources[0].Description; strings.Contains(got, secret[:10]) || !strings.HasSuffix(got, cutMark) {
		t.Errorf("description ends %q", got[len(got)-40:])
	}
}
