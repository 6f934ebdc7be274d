package audit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// SavedView is a person's named set of the browser's filters.
type SavedView struct {
	ID        string    `db:"id" json:"id"`
	Name      string    `db:"name" json:"name"`
	Query     string    `db:"query" json:"query"` // the filters as a query string
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// ErrViewNotFound is a saved view that does not exist, or is someone else's.
var ErrViewNotFound = fault.NotFound("saved view")

// Views lists userID's saved views by name.

// CodeViewExists is the code of SaveView's refusal of a name the person already uses.
const CodeViewExists = "view_exists"

func (l *Log) Views(ctx context.Context, userID string) ([]SavedView, error) {
	rows, err := l.pool.Query(ctx, `/* audit.Views */ SELECT id::text, name, query, created_at FROM audit_views
		WHERE user_id = $1 ORDER BY lower(name)`, userID)
	if err != nil {
		return nil, fmt.Errorf("audit: saved views: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowToStructByName[SavedView])
	if err != nil {
		return nil, fmt.Errorf("audit: saved views: %w", err)
	}
	return vs, nil
}

// SaveView stores the filters of query under name for the actor (a person), audited as
// audit.saved_view.create. The query is checked as a filter and kept without cursor or
// limit; a name the person already uses is a conflict.
func (l *Log) SaveView(ctx context.Context, actor Actor, name, query string) (SavedView, error) {
	name = strings.TrimSpace(name)
	var ve verr.Error
	switch {
	case name == "":
		ve.Add("name", "is required")
	case utf8.RuneCountInString(name) > 80:
		ve.Add("name", "is longer than 80 characters")
	}
	vals, err := url.ParseQuery(strings.TrimPrefix(query, "?"))
	var f Filter
	if err != nil {
		ve.Add("query", "is not a query string")
	} else if f, err = ParseFilter(vals); err != nil {
		var fe *verr.Error
		if errors.As(err, &fe) {
			for _, x := range fe.Fields {
				ve.Add("query", x.Field+" "+x.Message)
			}
		} else {
			return SavedView{}, err
		}
	}
	if err := ve.Err(); err != nil {
		return SavedView{}, err
	}
	if actor.ID == "" {
		return SavedView{}, fault.Forbidden("Only a signed-in person keeps saved views.")
	}
	v := SavedView{Name: name, Query: f.Query().Encode()}
	if len(v.Query) > 2000 {
		return SavedView{}, fault.Invalid("", "query: is too long to save", []verr.Field{{Field: "query", Message: "is too long to save"}})
	}
	err = db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `/* audit.SaveView */ INSERT INTO audit_views (user_id, name, query) VALUES ($1, $2, $3)
			RETURNING id::text, created_at`, actor.ID, v.Name, v.Query).Scan(&v.ID, &v.CreatedAt); err != nil {
			return err
		}
		_, err := Append(ctx, tx, Entry{Actor: actor, Action: "audit.saved_view.create", TargetType: "saved_view", TargetID: v.ID,
			TargetName: v.Name, Payload: map[string]string{"query": v.Query}})
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return SavedView{}, fault.Conflict(CodeViewExists, fmt.Sprintf("You already have a view named %q.", name))
	}
	if err != nil {
		return SavedView{}, fmt.Errorf("audit: save view: %w", err)
	}
	return v, nil
}

// DeleteView removes one of the actor's saved views, audited as audit.saved_view.delete.
func (l *Log) DeleteView(ctx context.Context, actor Actor, id string) error {
	if _, err := pgUUID(id); err != nil {
		return ErrViewNotFound
	}
	err := db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		var v SavedView
		err := tx.QueryRow(ctx, `/* audit.DeleteView */ DELETE FROM audit_views WHERE id = $1 AND user_id = $2
			RETURNING name, query`, id, actor.ID).Scan(&v.Name, &v.Query)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrViewNotFound
		}
		if err != nil {
			return err
		}
		_, err = Append(ctx, tx, Entry{Actor: actor, Action: "audit.saved_view.delete", TargetType: "saved_view", TargetID: id,
			TargetName: v.Name, Payload: map[string]string{"query": v.Query}})
		return err
	})
	if err != nil && !errors.Is(err, ErrViewNotFound) {
		return fmt.Errorf("audit: delete view: %w", err)
	}
	return err
}

// pgUUID checks that s is a UUID (a path parameter), so a malformed id is not found
// rather than a database error.
func pgUUID(s string) (string, error) {
	if len(s) != 36 {
		return "", errors.New("not a uuid")
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return "", errors.New("not a uuid")
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
				return "", errors.New("not a uuid")
			}
		}
	}
	return s, nil
}
