package assistant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A message's limit counts characters, as the form's maxlength does and the error says:
// 700 CJK characters (2,100 bytes) pass; one character past the limit does not.
func TestMessageLimitCountsCharacters(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	u := a.CreateUser(t, "writer", auth.RoleGuest, "writer-password-1")
	p := &auth.Principal{User: u, Kind: audit.ActorUser}
	if _, err := a.Assistant.Handle(t.Context(), p, p.Actor("", ""), "c-cjk", "help "+strings.Repeat("雨", 700), 0, 0); err != nil {
		t.Fatalf("700 characters: %v, want it read", err)
	}
	_, err := a.Assistant.Handle(t.Context(), p, p.Actor("", ""), "c-cjk", strings.Repeat("雨", assistant.MaxMessage+1), 0, 0)
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "message") {
		t.Fatalf("%d characters: %v, want the message refused as too long", assistant.MaxMessage+1, err)
	}
}
