package audit_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The filter's text fields are bounded in characters, as the page's maxlength counts
// them: a name in a non-Latin script within 200 characters (600 bytes) filters the log,
// and 201 characters are refused naming the field.
func TestFilterLimitsCountCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := audit.NewLog(pool)
	wide := func(n int) string { return strings.Repeat("理", n) }
	name, target, req := wide(200), wide(199)+"x", wide(198)+"-1"
	if err := appendOne(pool, audit.Entry{Actor: audit.Actor{Kind: audit.ActorUser, Name: name, RequestID: req},
		Action: "tool.enable", TargetType: wide(200), TargetID: target}); err != nil {
		t.Fatal(err)
	}
	appendN(t, pool, 2) // others the filter leaves out
	for _, k := range []string{"actor", "target_type", "target_id", "request_id"} {
		v := url.Values{"actor": {name}, "target_type": {wide(200)}, "target_id": {target}, "request_id": {req}}
		f, err := audit.ParseFilter(url.Values{k: v[k]})
		if err != nil {
			t.Errorf("%s of 200 characters (%d bytes): %v", k, len(v.Get(k)), err)
			continue
		}
		p, err := l.List(ctx, f)
		if err != nil || len(p.Items) != 1 || p.Items[0].Action != "tool.enable" {
			t.Errorf("%s of 200 characters: %d entries (%v), want the one", k, len(p.Items), err)
		}
	}
	// action is an action's name or a group, so it is never another script; 201
	// characters of one are still said to be too long.
	for _, k := range []string{"actor", "action", "target_type", "target_id", "request_id"} {
		_, err := audit.ParseFilter(url.Values{k: {wide(201)}})
		var ve *verr.Error
		if !errors.As(err, &ve) || !strings.Contains(ve.For(k), "longer than 200 characters") {
			t.Errorf("%s of 201 characters: %v, want it refused as too long", k, err)
		}
	}
}
