// Package memory is what memory_operations keeps (seed 000): notes an agent stores and
// finds again with PostgreSQL full-text search (a tsvector of the tags and the content,
// a GIN index, ranked), and todo lists. Notes and todos belong to the person the agent
// works for, across their conversations; each records the conversation it came from,
// and todo lists are per conversation.
package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Limits.
const (
	MaxContent = 100_000 // characters of a note
	MaxTags    = 20
	MaxResults = 50
)

// Service keeps the notes and todos.
type Service struct {
	pool *pgxpool.Pool
	tx   db.TxBeginner
}

// New returns the service; local (this process's bus reader, events.Local) may be nil.
func New(pool *pgxpool.Pool, local *events.Local) *Service {
	return &Service{pool: pool, tx: local.Beginner(pool)}
}

// change runs fn in a transaction with its audit entry: every change of a note or a
// todo is audited with it (what changed, never the note's text).
func (s *Service) change(ctx context.Context, o Owner, action, targetType string, fn func(tx pgx.Tx) (id string, payload map[string]any, err error)) error {
	return db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		id, payload, err := fn(tx)
		if err != nil {
			return err
		}
		payload["conversation_id"] = o.ConversationID
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: audit.Actor{Kind: audit.ActorUser, ID: o.UserID, Name: o.UserName},
			Action: action, TargetType: targetType, TargetID: id, Payload: payload})
		return err
	})
}

// Owner is whose notes: a person (user id) and the conversation.
type Owner struct {
	UserID, UserName string
	ConversationID   string
}

// Memory is one note.
type Memory struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Content        string    `json:"content"`
	Tags           []string  `json:"tags"`
	CreatedAt      time.Time `json:"created_at"`
	Rank           float32   `json:"rank,omitempty"`
}

// Todo is one item of a conversation's todo list.
type Todo struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Done      bool       `json:"done"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

func owned(o Owner) error {
	if o.UserID == "" {
		return fault.Invalid("no_owner", "memory belongs to a person; this call was made by nobody", nil)
	}
	return nil
}

func cleanTags(tags []string) ([]string, error) {
	out := []string{}
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && !contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > MaxTags {
		return nil, fault.Invalid("invalid_tags", fmt.Sprintf("tags: at most %d", MaxTags), nil)
	}
	return out, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Store keeps a note.
func (s *Service) Store(ctx context.Context, o Owner, content string, tags []string) (Memory, error) {
	if err := owned(o); err != nil {
		return Memory{}, err
	}
	content = strings.TrimSpace(content)
	if content == "" || len([]rune(content)) > MaxContent {
		return Memory{}, fault.Invalid("invalid_content", fmt.Sprintf("content: between 1 and %d characters", MaxContent), nil)
	}
	tags, err := cleanTags(tags)
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	err = s.change(ctx, o, "memory.store", "memory", func(tx pgx.Tx) (string, map[string]any, error) {
		err := tx.QueryRow(ctx, `/* memory.Store */ INSERT INTO memories (user_id, conversation_id, content, tags, search)
			VALUES ($1, $2, $3, $4, setweight(to_tsvector('english', array_to_string($4::text[], ' ')), 'A') ||
				setweight(to_tsvector('english', $3), 'B'))
			RETURNING id::text, conversation_id, content, tags, created_at`, o.UserID, o.ConversationID, content, tags).
			Scan(&m.ID, &m.ConversationID, &m.Content, &m.Tags, &m.CreatedAt)
		if err != nil {
			return "", nil, fmt.Errorf("memory: store: %w", err)
		}
		return m.ID, map[string]any{"characters": len([]rune(content)), "tags": tags}, nil
	})
	if err != nil {
		return Memory{}, err
	}
	return m, nil
}

// Search finds the person's notes that match query (web search syntax: words, "a
// phrase", -not, or), best first: ts_rank_cd over the tags (weighted higher) and the
// content.
func (s *Service) Search(ctx context.Context, o Owner, query string, limit int) ([]Memory, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" {
		return nil, fault.Invalid("invalid_query", "query: say what to look for", nil)
	}
	if limit <= 0 || limit > MaxResults {
		limit = 10
	}
	rows, err := s.pool.Query(ctx, `/* memory.Search */ SELECT id::text, conversation_id, content, tags, created_at, ts_rank_cd(search, q) AS rank
		FROM memories, websearch_to_tsquery('english', $2) AS q
		WHERE user_id = $1 AND search @@ q
		ORDER BY rank DESC, created_at DESC LIMIT $3`, o.UserID, query, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Memory, error) {
		var m Memory
		err := r.Scan(&m.ID, &m.ConversationID, &m.Content, &m.Tags, &m.CreatedAt, &m.Rank)
		return m, err
	})
}

// List returns the person's newest notes, those with tag only when tag is set.
func (s *Service) List(ctx context.Context, o Owner, tag string, limit int) ([]Memory, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxResults {
		limit = 20
	}
	rows, err := s.pool.Query(ctx, `/* memory.List */ SELECT id::text, conversation_id, content, tags, created_at, 0::real FROM memories
		WHERE user_id = $1 AND ($2 = '' OR $2 = ANY(tags)) ORDER BY created_at DESC LIMIT $3`,
		o.UserID, strings.ToLower(strings.TrimSpace(tag)), limit)
	if err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Memory, error) {
		var m Memory
		err := r.Scan(&m.ID, &m.ConversationID, &m.Content, &m.Tags, &m.CreatedAt, &m.Rank)
		return m, err
	})
}

// ErrNotFound is a note or todo the person does not have.
var ErrNotFound = fault.NotFound("memory")

// Delete removes one of the person's notes.
func (s *Service) Delete(ctx context.Context, o Owner, id string) error {
	if err := owned(o); err != nil {
		return err
	}
	return s.change(ctx, o, "memory.delete", "memory", func(tx pgx.Tx) (string, map[string]any, error) {
		tag, err := tx.Exec(ctx, `/* memory.Delete */ DELETE FROM memories WHERE id::text = $1 AND user_id = $2`, id, o.UserID)
		if err != nil {
			return "", nil, fmt.Errorf("memory: delete: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return "", nil, ErrNotFound
		}
		return id, map[string]any{}, nil
	})
}

// AddTodo adds an item to the conversation's todo list.
func (s *Service) AddTodo(ctx context.Context, o Owner, title string) (Todo, error) {
	if err := owned(o); err != nil {
		return Todo{}, err
	}
	title = strings.TrimSpace(title)
	if title == "" || len([]rune(title)) > 1000 {
		return Todo{}, fault.Invalid("invalid_title", "title: between 1 and 1000 characters", nil)
	}
	var t Todo
	err := s.change(ctx, o, "todo.add", "todo", func(tx pgx.Tx) (string, map[string]any, error) {
		err := tx.QueryRow(ctx, `/* memory.AddTodo */ INSERT INTO todos (user_id, conversation_id, title) VALUES ($1, $2, $3)
			RETURNING id::text, title, done_at, created_at`, o.UserID, o.ConversationID, title).Scan(&t.ID, &t.Title, &t.DoneAt, &t.CreatedAt)
		if err != nil {
			return "", nil, fmt.Errorf("memory: add a todo: %w", err)
		}
		return t.ID, map[string]any{"title": t.Title}, nil
	})
	if err != nil {
		return Todo{}, err
	}
	return t, nil
}

// CompleteTodo marks an item of the conversation's list done.
func (s *Service) CompleteTodo(ctx context.Context, o Owner, id string) (Todo, error) {
	if err := owned(o); err != nil {
		return Todo{}, err
	}
	var t Todo
	err := s.change(ctx, o, "todo.complete", "todo", func(tx pgx.Tx) (string, map[string]any, error) {
		err := tx.QueryRow(ctx, `/* memory.CompleteTodo */ UPDATE todos SET done_at = coalesce(done_at, now())
			WHERE id::text = $1 AND user_id = $2 AND conversation_id = $3 RETURNING id::text, title, done_at, created_at`,
			id, o.UserID, o.ConversationID).Scan(&t.ID, &t.Title, &t.DoneAt, &t.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil, fault.NotFound("todo")
		}
		if err != nil {
			return "", nil, fmt.Errorf("memory: complete a todo: %w", err)
		}
		return t.ID, map[string]any{"title": t.Title}, nil
	})
	if err != nil {
		return Todo{}, err
	}
	t.Done = true
	return t, nil
}

// Todos is the conversation's todo list, oldest first.
func (s *Service) Todos(ctx context.Context, o Owner) ([]Todo, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `/* memory.Todos */ SELECT id::text, title, done_at, created_at FROM todos
		WHERE user_id = $1 AND conversation_id = $2 ORDER BY created_at, id LIMIT 500`, o.UserID, o.ConversationID)
	if err != nil {
		return nil, fmt.Errorf("memory: todos: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Todo, error) {
		var t Todo
		err := r.Scan(&t.ID, &t.Title, &t.DoneAt, &t.CreatedAt)
		t.Done = t.DoneAt != nil
		return t, err
	})
}
