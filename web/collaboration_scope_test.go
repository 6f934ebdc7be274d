package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/views"
)

// A question's card says everything an approving answer grants, as widely as the grant
// matches: a whole tool names its operations (delete_file among file_operations'), no
// target is any file, and a grant is used any number of times for its minutes, or once
// when the agent asked for one use. A card that said only "file_operations" let a person
// approve every file operation on every path without being told.
func TestCollaborationCardSaysTheGrantsScope(t *testing.T) {
	t.Parallel()
	tags := regexp.MustCompile(`<[^>]*>`)
	text := func(c views.CollaborationPrompt) string {
		t.Helper()
		var b strings.Builder
		if err := views.LiveCollaborationAsked(c).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(tags.ReplaceAllString(b.String(), " ")), " ")
	}
	for _, tc := range []struct {
		c         views.CollaborationPrompt
		want, not []string
	}{
		{
			c: views.CollaborationPrompt{ID: "q1", Prompt: "May I tidy up?", ConversationID: "conv-1", AuthorizeOperation: "file_operations",
				TTL: 5 * time.Minute},
			want: []string{"approving allows all file operations ( file_operations ), delete_file included",
				"on any file (the agent named no path)", "for 5 minutes, any number of uses"},
		},
		{
			c: views.CollaborationPrompt{ID: "q2", Prompt: "May I write?", ConversationID: "conv-1",
				AuthorizeOperation: "file_operations.create_file", Target: "/srv/app.conf", OneTime: true, TTL: 2 * time.Minute},
			want: []string{"approving allows file_operations.create_file on /srv/app.conf only", "for one use, within 2 minutes"},
			not:  []string{"any file", "all file operations"},
		},
		{
			c:    views.CollaborationPrompt{ID: "q3", Prompt: "May I delete?", ConversationID: "conv-1", AuthorizeOperation: "delete_file"},
			want: []string{"every operation named delete_file in any tool", "on any path or target (the agent named none)"},
		},
		{
			c:   views.CollaborationPrompt{ID: "q4", Prompt: "Which file?", ConversationID: "conv-1"},
			not: []string{"approving allows"},
		},
	} {
		got := text(tc.c)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the card does not say %q:\n%s", tc.c.AuthorizeOperation, w, got)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%s on %s: the card says %q:\n%s", tc.c.AuthorizeOperation, tc.c.Target, w, got)
			}
		}
	}
}
