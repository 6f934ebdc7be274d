package audit

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A user named "system" is not mixed with Toolwarden's own entries: actor_kind tells
// them apart, and "person" is a person's acts signed in or through their tokens.
func TestActorKindFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	entries := []Entry{
		{Actor: System, Action: "test.own"}, // 1
		{Actor: Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-0000000000a1", Name: "system"}, Action: "test.user"},   // 2
		{Actor: Actor{Kind: ActorToken, ID: "00000000-0000-0000-0000-0000000000a1", Name: "system"}, Action: "test.token"}, // 3
		{Actor: Actor{Kind: ActorAnonymous, Name: "system"}, Action: "user.login_failed", Result: ResultFailure},           // 4
	}
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error { _, err := AppendBatch(ctx, tx, entries); return err }); err != nil {
		t.Fatal(err)
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	for _, tc := range []struct {
		kind string
		want []int64
	}{
		{"", []int64{4, 3, 2, 1}},
		{ActorSystem, []int64{1}},
		{ActorKindPerson, []int64{3, 2}},
		{ActorUser, []int64{2}},
		{ActorToken, []int64{3}},
		{ActorAnonymous, []int64{4}},
	} {
		v := url.Values{"actor": {"system"}}
		if tc.kind != "" {
			v.Set("actor_kind", tc.kind)
		}
		f, err := ParseFilter(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Query().Get("actor_kind"); got != tc.kind {
			t.Errorf("actor_kind %q: the filter's address has %q", tc.kind, got)
		}
		p, err := l.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range p.Items {
			ids = append(ids, r.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("actor=system, actor_kind %q: got %v, want %v", tc.kind, ids, tc.want)
		}
	}
	if _, err := ParseFilter(url.Values{"actor_kind": {"admin"}}); err == nil {
		t.Error("actor_kind=admin: accepted, want a field error")
	}
	for kind, want := range map[string]string{ActorUser: ActorKindPerson, ActorToken: ActorKindPerson, ActorSystem: ActorSystem, ActorAnonymous: ActorAnonymous} {
		if got := ActorKindFilter(kind); got != want {
			t.Errorf("ActorKindFilter(%q) = %q, want %q", kind, got, want)
		}
	}
}
