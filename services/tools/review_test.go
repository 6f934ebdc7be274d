package tools_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestRiskLoweringNeedsPermission: only a caller allowed to (administrators) sets a risk
// below what the annotations give; raising it, clearing it and keeping an existing
// setting are open to everyone who configures.
func TestRiskLoweringNeedsPermission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated") // no annotations: high
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Risk: ptr("low")})
	wantFields(t, err, "risk")
	if f.get(id).RiskOverride != nil {
		t.Fatal("a refused lowering was stored")
	}
	f.update(id, tools.Patch{Risk: ptr("high")})
	f.update(id, tools.Patch{Risk: ptr("medium"), MayLowerRisk: true})
	// Re-saving the administrator's setting with other changes is fine.
	f.update(id, tools.Patch{Risk: ptr("medium"), Tags: []string{"x"}, SetTags: true})
	f.update(id, tools.Patch{Risk: ptr("")})
	if f.get(id).RiskOverride != nil {
		t.Error("clearing the override failed")
	}
}

// TestStaleConfiguration: a change based on an older version is refused, not applied
// over the newer one.
func TestStaleConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"path": text("/a")}, ExpectVersion: ptr(0)})
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Params: map[string]tools.ParamInput{"path": text("/b")}, ExpectVersion: ptr(0)})
	se, _ := fault.As(err)
	if se == nil || se.Code != tools.CodeStale || se.Details != (tools.StaleVersion{Current: 1}) || !strings.Contains(err.Error(), "reload") {
		t.Fatalf("stale update: %v", err)
	}
	if got := string(f.config(id).Params["path"].Value); got != `"/a"` {
		t.Errorf("after a stale update: path %s", got)
	}
}

// TestCredentialValuesEncrypted: a value that carries a credential is encrypted even when
// the parameter's name does not say secret, then stays secret (blank keeps it).
func TestCredentialValuesEncrypted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{
		"options":  value(`{"depth": 2, "authorization": "Bearer x"}`),
		"label":    value(`"` + token[:4] + `"`),
		"anything": value(`{"url": "https://u:` + token + `@example.com/x"}`),
	}})
	raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id)
	if strings.Contains(raw, token) || strings.Contains(raw, "Bearer x") {
		t.Fatalf("a credential is stored in plain text: %s", raw)
	}
	cfg := f.config(id)
	if cfg.Params["options"].Secret == "" || cfg.Params["anything"].Secret == "" || cfg.Params["label"].Secret != "" {
		t.Fatalf("which values were encrypted: %+v", cfg.Params)
	}
	for _, p := range tools.ConfigParams(f.get(id), cfg) {
		if p.Name == "options" && (!p.Secret || !p.Stored || p.Value != "") {
			t.Errorf("options shown as %+v", p)
		}
	}
	// Saving the form again with the field blank keeps the stored value.
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"options": text(""), "label": text("ghp_"), "anything": text("")}})
	if got := f.config(id); got.Params["options"].Secret != cfg.Params["options"].Secret {
		t.Error("a blank field replaced the stored credential")
	}
}

// TestIDForms: ids PostgreSQL would not take are unknown tools, not errors.
func TestIDForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	for _, bad := range []string{"urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", "")} {
		if _, err := f.svc.Get(f.ctx, bad); !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("Get(%q): %v", bad, err)
		}
	}
	if it, err := f.svc.Get(f.ctx, strings.ToUpper(id)); err != nil || it.ID != id {
		t.Errorf("upper-case id: %v", err)
	}
	out, err := f.svc.SetEnabled(f.ctx, alice, []string{strings.ToUpper(id), id}, true, "", false)
	if err != nil || len(out) != 1 || out[0].ID != id || out[0].To != "enabled" {
		t.Errorf("the same tool twice, in two cases: %+v %v", out, err)
	}
	// Categories the same way: other spellings of an id are unknown ones, not a failure.
	cat, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "ids"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"urn:uuid:" + cat.ID, "{" + cat.ID + "}", strings.ReplaceAll(cat.ID, "-", "")} {
		if _, err := f.svc.SaveCategory(f.ctx, alice, bad, tools.CategoryInput{Name: "ids"}); !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("SaveCategory(%q): %v", bad, err)
		}
		if err := f.svc.DeleteCategory(f.ctx, alice, bad); !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("DeleteCategory(%q): %v", bad, err)
		}
		err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error { return f.svc.DeleteCategoryTx(f.ctx, tx, alice, bad) })
		if !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("DeleteCategoryTx(%q): %v", bad, err)
		}
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, strings.ToUpper(cat.ID), tools.CategoryInput{Name: "ids", Description: "upper"}); err != nil {
		t.Errorf("SaveCategory with an upper-case id: %v", err)
	}
	if err := f.svc.DeleteCategory(f.ctx, alice, strings.ToUpper(cat.ID)); err != nil {
		t.Errorf("DeleteCategory with an upper-case id: %v", err)
	}
}
