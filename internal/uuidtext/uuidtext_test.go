package uuidtext

import "testing"

func TestCanonical(t *testing.T) {
	t.Parallel()
	const id = "6f1b1f0e-0000-4000-8000-00000000000a"
	if !Canonical(id) {
		t.Errorf("%s: not canonical", id)
	}
	for _, other := range []string{"6F1B1F0E-0000-4000-8000-00000000000A", "{" + id + "}", "urn:uuid:" + id,
		"6f1b1f0e000040008000" + "00000000000a", "", "6f1b1f0e-0000-4000-8000-00000000000g"} {
		if Canonical(other) {
			t.Errorf("%q: canonical", other)
		}
	}
}
