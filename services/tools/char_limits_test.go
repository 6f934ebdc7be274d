package tools_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
)

// wide is n characters of a script that takes three bytes a character in UTF-8, so a
// text within a character limit can be over it in bytes.
func wide(n int) string { return strings.Repeat("理", n) }

// The limits on text people type are in characters, as the forms' maxlength counts
// them: a reason, a description or an expected text in a non-Latin script within the
// limit is kept, one character over it is refused naming the field.
func TestTextLimitsCountCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	// Each place reports on its own (Errorf), so one that counts bytes hides no other.

	// An override's reason.
	id := f.toolIn("inv-wide", "invalid")
	reason := wide(700) // 2,100 bytes
	if out, err := f.svc.SetEnabled(f.ctx, alice, []string{id}, true, reason, true); err != nil || out[0].Err() != nil {
		t.Errorf("override: a 700-character reason (%d bytes): %v %+v; want it enabled", len(reason), err, out)
	} else if it := f.get(id); it.Status != "enabled" || deref(it.EnableOverride) != reason {
		t.Errorf("override: status %s, reason of %d characters kept; want enabled with all 700", it.Status, len([]rune(deref(it.EnableOverride))))
	}
	{
		other := f.toolIn("inv-long", "invalid")
		_, err := f.svc.SetEnabled(f.ctx, alice, []string{other}, true, wide(tools.MaxReason+1), true)
		if ve := wantFields(t, err, "reason"); !strings.Contains(ve.For("reason"), "at most 2000 characters") {
			t.Errorf("message %q", ve.For("reason"))
		}
		if f.status(other) != "invalid" {
			t.Error("a refused override moved the tool")
		}
	}

	// A configuration version's reason.
	id = f.toolIn("cfg-wide", "validated")
	if it, err := f.svc.Update(f.ctx, alice, id, tools.Patch{TimeoutMS: ptr(5000), Reason: reason}); err != nil {
		t.Errorf("configuration: a 700-character reason (%d bytes): %v", len(reason), err)
	} else if vs, err := f.svc.ConfigVersions(f.ctx, id, 1); err != nil || len(vs) != 1 || vs[0].Reason != reason || vs[0].Version != it.ConfigVersion {
		t.Errorf("configuration: versions %+v (%v), want the new one with the reason", vs, err)
	}
	{
		was := f.get(id).ConfigVersion
		_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{TimeoutMS: ptr(6000), Reason: wide(tools.MaxReason + 1)})
		wantFields(t, err, "reason")
		if f.get(id).ConfigVersion != was {
			t.Error("a refused configuration was saved")
		}
	}

	// A category's description.
	desc := wide(200) // 600 bytes
	if cat, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "wide", Description: desc}); err != nil || cat.Description != desc {
		t.Errorf("category: a 200-character description (%d bytes): %v, kept %q", len(desc), err, cat.Description)
	}
	{
		_, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "wider", Description: wide(501)})
		if ve := wantFields(t, err, "description"); !strings.Contains(ve.For("description"), "500 characters") {
			t.Errorf("message %q", ve.For("description"))
		}
	}

	// A test case's expected text.
	id = f.toolIn("case-wide", "validated")
	text := wide(400) // 1,200 bytes
	if tc, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "wide", ExpectText: text}); err != nil || tc.ExpectText != text {
		t.Errorf("test case: a 400-character expected text (%d bytes): %v, kept %d characters", len(text), err, len([]rune(tc.ExpectText)))
	}
	{
		_, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "wider", ExpectText: wide(1001)})
		if ve := wantFields(t, err, "expect_text"); !strings.Contains(ve.For("expect_text"), "1,000 characters") {
			t.Errorf("message %q", ve.For("expect_text"))
		}
	}
}
