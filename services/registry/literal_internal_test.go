package registry

import (
	"strings"
	"testing"
)

// literalSecret splits an argument at "=" twice at most (--env=NAME=value): splitting
// once per "=" re-judges the rest each time, quadratic in the argument's length.
func TestLiteralSecretSplitsTwice(t *testing.T) {
	t.Parallel()
	if why := literalSecret("--env=GITHUB_TOKEN=abc123", ""); why != "the value of --env: the value of GITHUB_TOKEN" {
		t.Fatalf("--env=GITHUB_TOKEN=abc123: got %q, want the value of --env: the value of GITHUB_TOKEN", why)
	}
	// A secret name that only a walk past the second "=" would reach.
	if why := literalSecret(strings.Repeat("a=", 2000)+"GITHUB_TOKEN=abc123", ""); why != "" {
		t.Fatalf("a secret name behind 2,000 \"=\" was found (%.80q…): literalSecret splits at every \"=\"", why)
	}
}
