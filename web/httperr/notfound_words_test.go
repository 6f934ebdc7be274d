package httperr_test

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// A category or test case not found is named as such, not as a tool removed with its
// server (both wrap tools.ErrNotFound, whose words those were).
func TestPageMessageNamesWhatIsGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err error
		msg string
	}{
		{tools.ErrNotFound, "That tool no longer exists; it may have been removed with its server."},
		{tools.ErrCategoryNotFound, "That category no longer exists; it may have been deleted."},
		{tools.ErrTestCaseNotFound, "That test case no longer exists; it may have been deleted."},
		{fmt.Errorf("wrapped: %w", tools.ErrTestCaseNotFound), "That test case no longer exists; it may have been deleted."},
	} {
		if msg, mine := httperr.PageMessage(tc.err); msg != tc.msg || !mine {
			t.Errorf("%v: got %q, %v; want %q", tc.err, msg, mine, tc.msg)
		}
		if r := httperr.Classify(tc.err); r.Status != 404 || r.Message != "Not found." {
			t.Errorf("%v: the API answers %d %q, want 404 Not found.", tc.err, r.Status, r.Message)
		}
	}
}
