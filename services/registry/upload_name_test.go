package registry_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
)

// A sealed upload opens as the name and body it was sealed with, whatever the name holds:
// a newline in it moved the rest of the name into the body.
func TestSealUploadNameCannotShiftBody(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	for _, name := range []string{"a\nb.yaml", "plain.yaml", "", "12:x\n\n"} {
		body := "version: 1\nservers: []\n"
		sealed, err := a.Registry.SealUpload("user-1", name, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		gotName, gotBody, err := a.Registry.OpenUpload("user-1", sealed)
		if err != nil || gotName != name || string(gotBody) != body {
			t.Errorf("sealed %q: opened %q %q %v, want it as sealed", name, gotName, gotBody, err)
		}
	}
}
