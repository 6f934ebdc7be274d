package executions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/verr"
)

// loginSchema takes a typed secret, as the built-in terminal's send_input does.
const loginSchema = `{"type":"object","properties":{"user":{"type":"string"},
	"input":{"type":"string","writeOnly":true},"pin":{"type":"object","format":"password"}}}`

// fieldMessage is the message err (a *verr.Error) has for field, or "".
func fieldMessage(err error, field string) string {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return ""
	}
	for _, f := range ve.Fields {
		if f.Field == field {
			return f.Message
		}
	}
	return ""
}

// A compensation may not copy a secret argument of the undone step (writeOnly, a
// password, or anything under one) into an argument the undo tool does not hold as
// secret: the rollback's preview shows it masked by the undo tool's schema only. Into
// one the undo tool holds as secret it may.
func TestCheckMapNamesSecretSource(t *testing.T) {
	t.Parallel()
	self := json.RawMessage(loginSchema)
	undo := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},
		"secret_text":{"type":"string","writeOnly":true},"api_key":{"type":"string"}}}`)
	for _, tc := range []struct {
		name string
		m    map[string]executions.MappedArgument
		bad  string // the field refused, "" for none
	}{
		{"writeOnly into a plain argument", map[string]executions.MappedArgument{"text": {From: "/input"}}, "/argument_map/text"},
		{"under a password", map[string]executions.MappedArgument{"text": {From: "/pin/digits"}}, "/argument_map/text"},
		{"writeOnly into a secret argument", map[string]executions.MappedArgument{"secret_text": {From: "/input"}}, ""},
		{"into a credential's name", map[string]executions.MappedArgument{"api_key": {From: "/pin"}}, ""},
		{"a plain argument", map[string]executions.MappedArgument{"text": {From: "/user"}}, ""},
	} {
		secretSourceCase(t, tc.name, tc.m, tc.bad, self, undo)
	}
	// Beside a nested secret: a plain field next to it may be read; the object holding
	// it only into an argument the undo tool marks secret at the same place.
	nested := json.RawMessage(`{"type":"object","properties":{"connection":{"type":"object","properties":{
		"host":{"type":"string"},"password":{"type":"string","writeOnly":true}}},"username":{"type":"string"}}}`)
	undoNested := json.RawMessage(`{"type":"object","properties":{"host":{"type":"string"},
		"conn":{"type":"object","properties":{"host":{"type":"string"},"password":{"type":"string","writeOnly":true}}},
		"plain":{"type":"object"}}}`)
	for _, tc := range []struct {
		name string
		m    map[string]executions.MappedArgument
		bad  string
	}{
		{"a plain field beside a nested secret", map[string]executions.MappedArgument{"host": {From: "/connection/host"}}, ""},
		{"the object into one marked secret at the same place", map[string]executions.MappedArgument{"conn": {From: "/connection"}}, ""},
		{"the object into a plain one", map[string]executions.MappedArgument{"plain": {From: "/connection"}}, "/argument_map/plain"},
		{"the nested secret into a plain field", map[string]executions.MappedArgument{"host": {From: "/connection/password"}}, "/argument_map/host"},
	} {
		secretSourceCase(t, tc.name, tc.m, tc.bad, nested, undoNested)
	}
}

// secretSourceCase checks CheckMapNames of m between the schemas self and undo: bad is the
// field refused as reading a secret argument, "" for none.
func secretSourceCase(t *testing.T, name string, m map[string]executions.MappedArgument, bad string, self, undo json.RawMessage) {
	t.Run(name, func(t *testing.T) {
		err := executions.CheckMapNames(m, self, undo, "mt__log")
		if bad == "" {
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			return
		}
		if msg := fieldMessage(err, bad); !strings.Contains(msg, "secret argument") || !strings.Contains(msg, "mt__log") {
			t.Fatalf("got %v, want %s refused as reading a secret argument", err, bad)
		}
	})
}

// Setting such a compensation is refused; and one stored before it was (so never
// checked) is not run by a rollback, whose plan neither shows nor sends the secret.
func TestCompensationSecretSource(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "echo", "fail")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Types a password (pretend).", InputSchema: json.RawMessage(loginSchema)})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "forget", Description: "Forgets a password (pretend).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"secret_text":{"type":"string","writeOnly":true}}}`)})
	e.enable("mt__login")
	e.enable("mt__forget")
	e.setRisk("mt__login", risk.Low)
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	login := e.tool("mt__login").ID

	err := e.svc.SetCompensation(e.ctx, admin, login, "mt__echo", map[string]executions.MappedArgument{"message": {From: "/input"}})
	if msg := fieldMessage(err, "/argument_map/message"); !strings.Contains(msg, `secret argument "input"`) {
		t.Errorf("a secret copied into echo's message: got %v, want /argument_map/message refused", err)
	}
	if c, err := e.svc.CompensationOf(e.ctx, login); err != nil || c != nil {
		t.Errorf("after the refusal: got %+v, %v; want no compensation", c, err)
	}
	if err := e.svc.SetCompensation(e.ctx, admin, login, "mt__forget",
		map[string]executions.MappedArgument{"secret_text": {From: "/input"}}); err != nil {
		t.Fatalf("a secret copied into a secret argument: %v", err)
	}

	// As stored before the check (configuration import wrote it unchecked too).
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(e.ctx) //nolint:errcheck // a no-op after the commit
	if err := executions.StoreCompensation(e.ctx, tx, admin, login, "mt__login", e.tool("mt__echo").ID,
		map[string]executions.MappedArgument{"message": {From: "/input"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	const typed = "hunter2-typed-at-a-prompt"
	ex := e.create(e.admin, step("mt__login", `{"user":"ann","input":"`+typed+`"}`), step("mt__fail", `{}`))
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range rp.Steps {
		if strings.Contains(string(st.Arguments), typed) || strings.Contains(string(st.Effective), typed) {
			t.Fatalf("the rollback would send %s the secret: %s", st.Tool, st.Effective)
		}
	}
	if msg := fieldMessage(rp.Problems, "/steps/0"); !strings.Contains(msg, `secret argument "input"`) {
		t.Fatalf("problems: got %v, want /steps/0 naming the secret argument", rp.Problems)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{}); fieldMessage(err, "/steps/0") == "" {
		t.Fatalf("rollback: got %v, want it refused at /steps/0", err)
	}
}
