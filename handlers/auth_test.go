package handlers

import "testing"

func TestSafeNext(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                       "/",
		"/":                      "/",
		"/tokens":                "/tokens",
		"/users?x=1#a":           "/users?x=1#a",
		"//evil.example":         "/",
		"/\\evil.example":        "/",
		"/\t/evil.example":       "/",
		"/\n/evil.example":       "/",
		"/ /evil.example":        "/",
		"https://evil.example/":  "/",
		"javascript:alert(1)":    "/",
		"evil.example":           "/",
		"/login?next=/x":         "/",
		"/a\\b":                  "/",
		"/%2F%2Fevil.example":    "/%2F%2Fevil.example", // stays a path on this site
		"/\u00a0/evil.example":   "/\u00a0/evil.example",
		"/users/../../x":         "/users/../../x",
		"/\x7f/evil.example":     "/",
		"/tokens?next=//evil.ex": "/tokens?next=//evil.ex",
	}
	for in, want := range cases {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
