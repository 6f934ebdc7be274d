package handlers

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A person's topic (the questions user_collaboration asks them) is theirs alone, in a
// browser session, and only with a role that answers.
func TestUserTopicFollowers(t *testing.T) {
	t.Parallel()
	l := Live{Deps: &Deps{}}
	topic := grants.UserTopic("u-alice")
	for _, tc := range []struct {
		name string
		p    *auth.Principal
		want bool
	}{
		{"alice's session", &auth.Principal{User: auth.User{ID: "u-alice", Role: auth.RoleToolUser}, Kind: audit.ActorUser}, true},
		{"alice's token", &auth.Principal{User: auth.User{ID: "u-alice", Role: auth.RoleToolUser}, Kind: audit.ActorToken}, false},
		{"bob", &auth.Principal{User: auth.User{ID: "u-bob", Role: auth.RoleAdmin}, Kind: audit.ActorUser}, false},
		{"alice as an auditor", &auth.Principal{User: auth.User{ID: "u-alice", Role: auth.RoleAuditor}, Kind: audit.ActorUser}, false},
		{"nobody", nil, false},
	} {
		if got := l.MayFollow(tc.p, topic); got != tc.want {
			t.Errorf("%s: MayFollow(%s) = %v, want %v", tc.name, topic, got, tc.want)
		}
	}
	if l.MayFollow(&auth.Principal{User: auth.User{ID: "", Role: auth.RoleAdmin}, Kind: audit.ActorUser}, "user:") {
		t.Error("the empty user topic is followable")
	}
}

// An answer's form goes back only to a path of this site.
func TestLocalPath(t *testing.T) {
	for ref, want := range map[string]bool{"/grants": true, "/approvals?x=1": true, "": false, "//evil.example": false,
		"/\\evil.example": false, "/\t/evil.example": false, "https://evil.example/": false, "grants": false} {
		if got := localPath(ref); got != want {
			t.Errorf("localPath(%q) = %v, want %v", ref, got, want)
		}
	}
}
