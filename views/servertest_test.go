package views

import (
	"context"
	"strings"
	"testing"
)

// A connection test that stopped counting at its limit says so beside the count, which
// is then no total.
func TestServerTestResultSaysListCut(t *testing.T) {
	var b strings.Builder
	cut := "the tool list passed 16 MiB after 9 pages, the test's limit: 18 tools counted, more not read (discovery reads up to 256 MiB)"
	if err := ServerTestResult(&ServerTest{OK: true, ToolCount: 18, Tools: []string{"a", "b"}, ToolsCut: cut}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `data-testid="test-tools-cut"`) || !strings.Contains(b.String(), "18 tools counted, more not read") {
		t.Fatalf("the result does not say the count was cut:\n%s", b.String())
	}
	b.Reset()
	if err := ServerTestResult(&ServerTest{OK: true, ToolCount: 2, Tools: []string{"a", "b"}}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "test-tools-cut") {
		t.Fatal("a whole list is said to be cut")
	}
}
