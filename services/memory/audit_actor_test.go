package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/memory"
	"github.com/toolwarden/toolwarden/services/usage"
)

// A todo's title and a note's tags are the caller's words, kept in the hash-chained
// audit log: a credential in them is masked there as the router masks it in the call's
// own records (the todo and the note keep what was written).
func TestAuditMasksSecretsInTitlesAndTags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: uuid.NewString(), UserName: "alice", ConversationID: "conv-secret"}
	// Credentials usage's own tests show are detected.
	const titleKey, tagKey, updateKey = "sk-proj-abcdefghijklmnop1234567890",
		"sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789", "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"

	todo, err := s.AddTodo(ctx, o, "rotate "+titleKey+" tonight")
	if err != nil {
		t.Fatal(err)
	}
	if todo.Title != "rotate "+titleKey+" tonight" {
		t.Fatalf("the todo keeps its title: %q", todo.Title)
	}
	if _, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: todo.ID, Title: "revoke " + updateKey}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteTodos(ctx, o, []memory.TodoChange{{Title: "use " + titleKey}}); err != nil {
		t.Fatal(err)
	}
	note, err := s.Store(ctx, o, "the staging key is in the vault", []string{"keys", tagKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(note.Tags) != 2 || note.Tags[1] != tagKey {
		t.Fatalf("the note keeps its tags: %v", note.Tags)
	}

	rows, err := pool.Query(ctx, `SELECT action, target_name, payload::text FROM audit_log
		WHERE payload->>'conversation_id' = $1 ORDER BY id`, o.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]string{}
	for rows.Next() {
		var action, name, payload string
		if err := rows.Scan(&action, &name, &payload); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{titleKey, tagKey, updateKey} {
			if strings.Contains(name, key) || strings.Contains(payload, key) {
				t.Errorf("%s audit row keeps a credential in clear: target_name %q, payload %s", action, name, payload)
			}
		}
		seen[action] = name + " " + payload
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The rows still say what they were about, the credential masked.
	for action, want := range map[string]string{
		"todo.add":     "rotate " + usage.Mask + " tonight",
		"todo.update":  "revoke " + usage.Mask,
		"memory.store": `["keys","` + usage.Mask + `"]`,
	} {
		if !strings.Contains(seen[action], want) {
			t.Errorf("%s audit row: %q, want it to hold %q", action, seen[action], want)
		}
	}
}

// Each change made with an API token's caller meta is audited as the token's (its
// person, and the token in the payload), a session's as the person's.
func TestAuditNamesTokenCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	user, token := uuid.NewString(), uuid.NewString()
	o := memory.Owner{UserID: user, UserName: "ada", ConversationID: "conv-token", ActorKind: audit.ActorToken, TokenID: token}
	note, err := s.Store(ctx, o, "the staging server is db-2", []string{"staging"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, o, note.ID); err != nil {
		t.Fatal(err)
	}
	todo, err := s.AddTodo(ctx, o, "check db-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteTodo(ctx, o, todo.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteTodos(ctx, o, []memory.TodoChange{{Title: "plan"}}); err != nil {
		t.Fatal(err)
	}
	session := o
	session.ActorKind, session.TokenID = audit.ActorUser, ""
	if _, err := s.AddTodo(ctx, session, "by hand"); err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `SELECT action, actor_kind, actor_id::text, coalesce(payload->>'token_id', '') FROM audit_log
		WHERE payload->>'conversation_id' = $1 ORDER BY id`, o.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var action, kind, id, tok string
		if err := rows.Scan(&action, &kind, &id, &tok); err != nil {
			t.Fatal(err)
		}
		if id != user {
			t.Errorf("%s audited for %s, want the person %s", action, id, user)
		}
		got = append(got, action+" "+kind+" "+tok)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"memory.store token " + token, "memory.delete token " + token, "todo.add token " + token,
		"todo.complete token " + token, "todo.write token " + token, "todo.add user "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
