package secrets

import (
	"net/url"
	"strings"
	"testing"
)

// A URL nested in a query value is followed one level, not once per "://": each level
// parses the rest of the text again, so an unbounded walk is quadratic in its length.
// Not parallel: it sets the package's hook.
func TestLooksSecretValueNestedURLsBounded(t *testing.T) {
	calls := 0
	onSecretURL = func() { calls++ }
	t.Cleanup(func() { onSecretURL = nil })

	deep := "http://x/?a=" + strings.Repeat("a://?a=", 5000) + "z"
	if LooksSecretValue(deep) {
		t.Fatalf("a deep chain of empty URLs was taken for a credential")
	}
	if calls > 2 {
		t.Fatalf("secretURL ran %d times for one value: nested URLs are followed without a bound (want at most 2)", calls)
	}
}

func TestLooksSecretValueOneNestedURL(t *testing.T) {
	t.Parallel()
	const gh = "ghp_aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3"
	for _, v := range []string{
		"https://proxy.example/?next=" + url.QueryEscape("https://api.example/v1?api_key=abc123"),
		"https://proxy.example/?next=https://api.example/v1?t=" + gh,
		"https://proxy.example/?db=" + url.QueryEscape("postgres://user:pw@db/app"),
		"https://proxy.example/?next=" + url.QueryEscape("https://api.example/"+gh+"/sse"),
	} {
		if !LooksSecretValue(v) {
			t.Errorf("LooksSecretValue(%q) = false: the credential in the nested URL was missed", v)
		}
	}
	if v := "https://proxy.example/?next=" + url.QueryEscape("https://api.example/v1?page=2"); LooksSecretValue(v) {
		t.Errorf("LooksSecretValue(%q) = true for a nested URL without a credential", v)
	}
}
