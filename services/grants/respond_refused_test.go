package grants_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Words refused as an answer (none, too many) are an error on field response that comes
// with the question, still waiting, so a page can ask it again. The question is looked
// at first: words to another's question say not found, to an answered one not pending,
// whatever the words.
func TestRespondRefusedWords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice, bob := addUser(t, pool, "alice"), addUser(t, pool, "bob")
	var waiting, answered string
	if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'Which file?') RETURNING id`,
		alice.ID).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, status) VALUES ($1, 'c', 'Done?', 'answered') RETURNING id`,
		alice.ID).Scan(&answered); err != nil {
		t.Fatal(err)
	}

	for words, want := range map[string]string{"  ": "say something", strings.Repeat("a", grants.MaxResponse+1): "at most 10000 characters"} {
		c, err := s.RespondAs(ctx, alice, waiting, words, grants.Approve)
		var ve *verr.Error
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.For("response"), want) {
			t.Fatalf("the words %.20q: %v", words, err)
		}
		if c.ID != waiting || c.Prompt != "Which file?" || c.Status != grants.StatusPending {
			t.Fatalf("the words %.20q come back with %+v, not the waiting question", words, c)
		}
	}
	if _, err := s.RespondAs(ctx, bob, waiting, "", grants.Approve); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("no words to another's question: %v", err)
	}
	if _, err := s.RespondAs(ctx, alice, answered, "", grants.Approve); !errors.Is(err, grants.ErrNotPending) {
		t.Fatalf("no words to an answered question: %v", err)
	}
	if c, err := s.GetCollaboration(ctx, waiting); err != nil || c.Status != grants.StatusPending {
		t.Fatalf("after refused words: %+v %v", c, err)
	}
}
