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
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Limits.
const (
	MaxContent = 100_000 // characters of a note
	MaxTags    = 20
	MaxTag     = 100 // characters of a tag
	MaxResults = 50
	MaxTodos   = 500  // items of one conversation's todo list
	MaxTitle   = 1000 // characters of a todo's title, once trimmed
	// A person's notes and todos across their conversations, whose ids callers choose:
	// without these an agent could fill the database one conversation at a time.
	MaxNotes       = 10_000
	MaxPersonTodos = 10_000
	// MaxBytes is the content bytes of a person's notes together: MaxNotes notes of
	// MaxContent characters would let one person keep about 4 GB.
	MaxBytes = 64 << 20
)

// TodosKept is how long a conversation's todo list that nobody changed is kept: on
// /mcp every client session without a conversation id is a conversation of its own, and
// nothing lists them for the person to clear, so without it a person would reach
// MaxPersonTodos for good. A change is an add, a write, a rename or a status change (the
// times a todo keeps: created_at, done_at, changed_at).
const TodosKept = 90 * 24 * time.Hour

// The limits as applied (tests lower them).
var (
	notesCap, personTodosCap = MaxNotes, MaxPersonTodos
	bytesCap                 = int64(MaxBytes)
	// pruneBatch is how many conversations' lists PruneTodos removes in a transaction.
	pruneBatch = 100
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
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: o.actor(),
			Action: action, TargetType: targetType, TargetID: id, Payload: payload})
		return err
	})
}

// Owner is whose notes: a person (user id) and the conversation.
type Owner struct {
	UserID, UserName string
	ConversationID   string
	// ActorKind and TokenID are who calls (callmeta.Meta): a call made with an API
	// token is audited as the token's, as the router's own rows of the call are.
	ActorKind, TokenID string
}

func (o Owner) actor() audit.Actor { return audit.Caller(o.ActorKind, o.UserID, o.UserName, o.TokenID) }

// Memory is one note.
type Memory struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Content        string    `json:"content"`
	Tags           []string  `json:"tags"`
	CreatedAt      time.Time `json:"created_at"`
	Rank           float32   `json:"rank,omitempty"`
}

// The statuses of a todo (seed 000 §6: starting one, completing one).
const (
	TodoNotStarted = "not-started"
	TodoInProgress = "in-progress"
	TodoCompleted  = "completed"
)

// TodoStatuses lists them.
var TodoStatuses = []string{TodoNotStarted, TodoInProgress, TodoCompleted}

// Todo is one item of a conversation's todo list.
type Todo struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Status    string     `json:"status"`
	Done      bool       `json:"done"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

// TodoChange is one item of manage_todos' write (ID empty) or update (ID set).
type TodoChange struct {
	ID     string `json:"id,omitempty"`
	Title  string `json:"title,omitempty"`
	Status string `json:"status,omitempty"`
}

func owned(o Owner) error {
	if o.UserID == "" {
		return fault.Invalid("no_owner", "memory belongs to a person; this call was made by nobody", nil)
	}
	return noNUL("invalid_conversation", "conversation_id", o.ConversationID)
}

// noNUL refuses a text PostgreSQL cannot take (JSON may carry \u0000; a text column
// or jsonb may not): unchecked, the database's "invalid byte sequence" came back naming
// no field.
func noNUL(code, field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fault.Invalid(code, field+`: contains a NUL character (\u0000), which cannot be stored or searched for`, nil)
	}
	return nil
}

func cleanTags(tags []string) ([]string, error) {
	out := []string{}
	for i, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if utf8.RuneCountInString(t) > MaxTag {
			// Unbounded, 20 tags of 200,000 characters made a note (and its audit row) 4 MB.
			return nil, fault.Invalid("invalid_tags", fmt.Sprintf("tags: each at most %d characters", MaxTag), nil)
		}
		if err := noNUL("invalid_tags", fmt.Sprintf("tags[%d]", i), t); err != nil {
			return nil, err
		}
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
	if err := noNUL("invalid_content", "content", content); err != nil {
		return Memory{}, err
	}
	tags, err := cleanTags(tags)
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	err = s.change(ctx, o, "memory.store", "memory", func(tx pgx.Tx) (string, map[string]any, error) {
		if _, err := tx.Exec(ctx, `/* memory.Store.lock */ SELECT pg_advisory_xact_lock(hashtextextended('memories:' || $1, 0))`,
			o.UserID); err != nil {
			return "", nil, fmt.Errorf("memory: lock the notes: %w", err)
		}
		// octet_length of a stored value reads its size from the TOAST header, not the text.
		var n int
		var used int64
		if err := tx.QueryRow(ctx, `/* memory.Store.count */ SELECT count(*), coalesce(sum(octet_length(content)), 0) FROM memories WHERE user_id = $1`,
			o.UserID).Scan(&n, &used); err != nil {
			return "", nil, fmt.Errorf("memory: count the notes: %w", err)
		}
		if n >= notesCap {
			return "", nil, fault.Invalid("memory_full", fmt.Sprintf(
				"memory: you keep %d notes, the most a person may; delete the ones no longer needed, then store", notesCap), nil)
		}
		if size := int64(len(content)); used+size > bytesCap {
			return "", nil, fault.Invalid("memory_full", fmt.Sprintf(
				"memory: your notes take %s of the %s a person may keep, and this one is %s more; delete the notes no longer needed, then store",
				formatSize(used), formatSize(bytesCap), formatSize(size)), nil)
		}
		err := tx.QueryRow(ctx, `/* memory.Store */ INSERT INTO memories (user_id, conversation_id, content, tags, search)
			VALUES ($1, $2, $3, $4, setweight(to_tsvector('english', array_to_string($4::text[], ' ')), 'A') ||
				setweight(to_tsvector('english', $3), 'B'))
			RETURNING id::text, conversation_id, content, tags, created_at`, o.UserID, o.ConversationID, content, tags).
			Scan(&m.ID, &m.ConversationID, &m.Content, &m.Tags, &m.CreatedAt)
		if err != nil {
			return "", nil, fmt.Errorf("memory: store: %w", err)
		}
		masked := make([]string, len(tags))
		for i, tag := range tags {
			masked[i] = usage.RedactText(tag) // as the router masks the call's own records
		}
		return m.ID, map[string]any{"characters": len([]rune(content)), "tags": masked}, nil
	})
	if err != nil {
		return Memory{}, err
	}
	return m, nil
}

// formatSize is n bytes as a person reads it (900 bytes, 12.5 KiB, 64 MiB).
func formatSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<10)), ".0") + " KiB"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MiB"
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
	if err := noNUL("invalid_query", "query", query); err != nil {
		return nil, err
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
	return collectMemories(rows, "search")
}

// collectMemories reads the notes of a search or a list; a failure that comes only as
// the rows are read (the query's own, on the server) says which.
func collectMemories(rows pgx.Rows, what string) ([]Memory, error) {
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Memory, error) {
		var m Memory
		err := r.Scan(&m.ID, &m.ConversationID, &m.Content, &m.Tags, &m.CreatedAt, &m.Rank)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("memory: %s: %w", what, err)
	}
	return ms, nil
}

// List returns the person's newest notes, those with tag only when tag is set.
func (s *Service) List(ctx context.Context, o Owner, tag string, limit int) ([]Memory, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	if err := noNUL("invalid_tag", "tag", tag); err != nil {
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
	return collectMemories(rows, "list")
}

// ErrNotFound is a note or todo the person does not have.
var ErrNotFound = fault.NotFound("memory")

// Delete removes one of the person's notes.
func (s *Service) Delete(ctx context.Context, o Owner, id string) error {
	if err := owned(o); err != nil {
		return err
	}
	if err := noNUL("invalid_id", "id", id); err != nil {
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

const todoColumns = `id::text, title, status, done_at, created_at`

func scanTodo(row pgx.Row) (Todo, error) {
	var t Todo
	err := row.Scan(&t.ID, &t.Title, &t.Status, &t.DoneAt, &t.CreatedAt)
	t.Done = t.Status == TodoCompleted
	return t, err
}

// checkTitle trims a title and checks it; field is how the caller named it ("title",
// "todos[3].title").
func checkTitle(field, title string) (string, error) {
	title = strings.TrimSpace(title)
	if title == "" || utf8.RuneCountInString(title) > MaxTitle {
		return "", fault.Invalid("invalid_title", fmt.Sprintf("%s: between 1 and %d characters once trimmed", field, MaxTitle), nil)
	}
	if err := noNUL("invalid_title", field, title); err != nil {
		return "", err
	}
	return title, nil
}

func checkStatus(field, status string) (string, error) {
	if status == "" {
		return TodoNotStarted, nil
	}
	if !contains(TodoStatuses, status) {
		return "", fault.Invalid("invalid_status", field+": one of "+strings.Join(TodoStatuses, ", "), nil)
	}
	return status, nil
}

// item names field of a batch's i-th todo ("todos[3].title").
func item(i int, field string) string { return fmt.Sprintf("todos[%d].%s", i, field) }

// lockList serializes the changes of one conversation's todo list, first in their
// transaction (before any row or the journal lock): AddTodo's count then holds until it
// commits, and no two changes lock the list's rows in different orders.
func lockList(ctx context.Context, tx pgx.Tx, o Owner) error {
	if _, err := tx.Exec(ctx, `/* memory.lockList */ SELECT pg_advisory_xact_lock(hashtextextended('todos:' || $1 || ':' || $2, 0))`,
		o.UserID, o.ConversationID); err != nil {
		return fmt.Errorf("memory: lock the todo list: %w", err)
	}
	return nil
}

// personTodosRoom refuses adding n todos when the person's lists, all conversations
// together, would hold more than personTodosCap. Lists of different conversations are
// locked apart, so it first takes a per-person lock (after lockList, before the journal
// lock) held to commit: concurrent adds and writes then count one after the other.
func personTodosRoom(ctx context.Context, tx pgx.Tx, o Owner, n int) error {
	if _, err := tx.Exec(ctx, `/* memory.personTodos.lock */ SELECT pg_advisory_xact_lock(hashtextextended('todos-person:' || $1, 0))`,
		o.UserID); err != nil {
		return fmt.Errorf("memory: lock the person's todos: %w", err)
	}
	var have int
	if err := tx.QueryRow(ctx, `/* memory.personTodos */ SELECT count(*) FROM todos WHERE user_id = $1`, o.UserID).Scan(&have); err != nil {
		return fmt.Errorf("memory: count the todos: %w", err)
	}
	if have+n > personTodosCap {
		// The person cannot list their conversations (on /mcp each client session may be
		// one), so the refusal says when room comes back on its own.
		var oldest *time.Time
		if err := tx.QueryRow(ctx, `/* memory.personTodos.oldest */ SELECT min(changed) FROM (
			SELECT max(greatest(created_at, done_at, changed_at)) AS changed FROM todos WHERE user_id = $1 GROUP BY conversation_id) l`,
			o.UserID).Scan(&oldest); err != nil {
			return fmt.Errorf("memory: the oldest todo list: %w", err)
		}
		when := ""
		if oldest != nil {
			when = fmt.Sprintf(" (your oldest, unchanged since %s, goes after %s)",
				oldest.UTC().Format(time.DateOnly), oldest.Add(TodosKept).UTC().Format(time.DateOnly))
		}
		return fault.Invalid("todos_full", fmt.Sprintf("todos: your lists hold %d items in all conversations, and %d is the most a "+
			"person may keep. A conversation's list unchanged for %d days is removed on its own%s; to make room now, clear the "+
			"lists no longer needed (manage_todos write with an empty list, in their conversation), then add",
			have, personTodosCap, int(TodosKept.Hours()/24), when), nil)
	}
	return nil
}

func addTodo(ctx context.Context, tx pgx.Tx, o Owner, title, status string) (Todo, error) {
	t, err := scanTodo(tx.QueryRow(ctx, `/* memory.AddTodo */ INSERT INTO todos (user_id, conversation_id, title, status, done_at, created_at)
		VALUES ($1, $2, $3, $4, CASE WHEN $4 = 'completed' THEN now() END, clock_timestamp()) RETURNING `+todoColumns, o.UserID, o.ConversationID, title, status))
	if err != nil {
		return Todo{}, fmt.Errorf("memory: add a todo: %w", err)
	}
	return t, nil
}

// AddTodo adds an item to the conversation's todo list.
func (s *Service) AddTodo(ctx context.Context, o Owner, title string) (Todo, error) {
	if err := owned(o); err != nil {
		return Todo{}, err
	}
	title, err := checkTitle("title", title)
	if err != nil {
		return Todo{}, err
	}
	var t Todo
	err = s.change(ctx, o, "todo.add", "todo", func(tx pgx.Tx) (string, map[string]any, error) {
		if err := lockList(ctx, tx, o); err != nil {
			return "", nil, err
		}
		// Todos lists MaxTodos items: one more would be stored but never shown.
		var n int
		if err := tx.QueryRow(ctx, `/* memory.AddTodo.count */ SELECT count(*) FROM todos WHERE user_id = $1 AND conversation_id = $2`,
			o.UserID, o.ConversationID).Scan(&n); err != nil {
			return "", nil, fmt.Errorf("memory: count the todos: %w", err)
		}
		if n >= MaxTodos {
			return "", nil, fault.Invalid("todo_list_full", fmt.Sprintf(
				"todos: the list is full (%d items, completed ones included); write the list again without the items no longer needed, then add", MaxTodos), nil)
		}
		if err := personTodosRoom(ctx, tx, o, 1); err != nil {
			return "", nil, err
		}
		var err error
		t, err = addTodo(ctx, tx, o, title, TodoNotStarted)
		return t.ID, map[string]any{"title": usage.RedactText(t.Title)}, err
	})
	return t, err
}

// updateTodo changes one todo; field names its id as the caller gave it ("id",
// "todos[7].id").
func updateTodo(ctx context.Context, tx pgx.Tx, o Owner, c TodoChange, field string) (Todo, error) {
	t, err := scanTodo(tx.QueryRow(ctx, `/* memory.UpdateTodo */ UPDATE todos SET title = coalesce(nullif($4, ''), title),
			status = coalesce(nullif($5, ''), status),
			done_at = CASE WHEN coalesce(nullif($5, ''), status) = 'completed' THEN coalesce(done_at, now()) END,
			changed_at = clock_timestamp()
		WHERE id::text = $1 AND user_id = $2 AND conversation_id = $3 RETURNING `+todoColumns,
		c.ID, o.UserID, o.ConversationID, c.Title, c.Status))
	if errors.Is(err, pgx.ErrNoRows) {
		// Another conversation's todo is not found either: say so, as the id may be right.
		return Todo{}, fault.NotFound("todo").Withf("%s: no todo %q in this conversation's list "+
			"(a todo belongs to the conversation it was added in)", field, c.ID)
	}
	if err != nil {
		return Todo{}, fmt.Errorf("memory: update a todo: %w", err)
	}
	return t, nil
}

// CompleteTodo marks an item of the conversation's list done.
func (s *Service) CompleteTodo(ctx context.Context, o Owner, id string) (Todo, error) {
	// Its one argument is id, not a batch's todos[0].id.
	ts, err := s.updateTodos(ctx, o, []TodoChange{{ID: id, Status: TodoCompleted}}, func(_ int, field string) string { return field })
	if err != nil {
		return Todo{}, err
	}
	return ts[0], nil
}

// UpdateTodos changes items of the conversation's list (title, status), all or none. A
// refusal names the item (todos[i].field).
func (s *Service) UpdateTodos(ctx context.Context, o Owner, changes []TodoChange) ([]Todo, error) {
	return s.updateTodos(ctx, o, changes, item)
}

func (s *Service) updateTodos(ctx context.Context, o Owner, changes []TodoChange, name func(i int, field string) string) ([]Todo, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return nil, fault.Invalid("invalid_todos", "todos: name at least one (id, and title or status)", nil)
	}
	if len(changes) > MaxTodos {
		return nil, fault.Invalid("invalid_todos", fmt.Sprintf("todos: at most %d", MaxTodos), nil)
	}
	// The titles are trimmed as WriteTodos trims them, on a copy (the caller's slice is
	// theirs): storing the untrimmed one would keep its padding, megabytes of it, in
	// the row and in the append-only audit log.
	changes = slices.Clone(changes)
	for i, c := range changes {
		if c.ID == "" {
			return nil, fault.Invalid("invalid_todos", name(i, "id")+": which todo", nil)
		}
		if err := noNUL("invalid_todos", name(i, "id"), c.ID); err != nil {
			return nil, err
		}
		if c.Title != "" {
			var err error
			if changes[i].Title, err = checkTitle(name(i, "title"), c.Title); err != nil {
				return nil, err
			}
		}
		if c.Status != "" {
			if _, err := checkStatus(name(i, "status"), c.Status); err != nil {
				return nil, err
			}
		}
	}
	var out []Todo
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		if err := lockList(ctx, tx, o); err != nil {
			return err
		}
		// Every row is updated before the journal lock is taken, by one batch at the end:
		// appending per row would hold the cluster-wide journal lock while waiting for the
		// next row, deadlocking with whoever holds that row and appends next.
		out = make([]Todo, 0, len(changes))
		entries := make([]audit.Entry, 0, len(changes))
		for i, c := range changes {
			t, err := updateTodo(ctx, tx, o, c, name(i, "id"))
			if err != nil {
				return err
			}
			action := "todo.update"
			if t.Status == TodoCompleted && c.Status == TodoCompleted {
				action = "todo.complete"
			}
			entries = append(entries, audit.Entry{Actor: o.actor(),
				Action: action, TargetType: "todo", TargetID: t.ID, TargetName: usage.RedactText(t.Title),
				Payload: map[string]any{"conversation_id": o.ConversationID, "status": t.Status}})
			out = append(out, t)
		}
		_, err := audit.AppendBatch(ctx, tx, entries)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WriteTodos replaces the conversation's todo list (seed 000's manage_todos write).
func (s *Service) WriteTodos(ctx context.Context, o Owner, items []TodoChange) ([]Todo, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	if len(items) > MaxTodos {
		return nil, fault.Invalid("invalid_todos", fmt.Sprintf("todos: at most %d", MaxTodos), nil)
	}
	for i := range items {
		var err error
		if items[i].Title, err = checkTitle(item(i, "title"), items[i].Title); err != nil {
			return nil, err
		}
		if items[i].Status, err = checkStatus(item(i, "status"), items[i].Status); err != nil {
			return nil, err
		}
	}
	out := make([]Todo, 0, len(items))
	err := s.change(ctx, o, "todo.write", "todo_list", func(tx pgx.Tx) (string, map[string]any, error) {
		if err := lockList(ctx, tx, o); err != nil {
			return "", nil, err
		}
		if _, err := tx.Exec(ctx, `/* memory.WriteTodos */ DELETE FROM todos WHERE user_id = $1 AND conversation_id = $2`,
			o.UserID, o.ConversationID); err != nil {
			return "", nil, fmt.Errorf("memory: write the todo list: %w", err)
		}
		if err := personTodosRoom(ctx, tx, o, len(items)); err != nil {
			return "", nil, err
		}
		for _, it := range items {
			t, err := addTodo(ctx, tx, o, it.Title, it.Status)
			if err != nil {
				return "", nil, err
			}
			out = append(out, t)
		}
		return o.ConversationID, map[string]any{"todos": len(out)}, nil
	})
	return out, err
}

// Todos is the conversation's todo list, oldest first.
func (s *Service) Todos(ctx context.Context, o Owner) ([]Todo, error) {
	if err := owned(o); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `/* memory.Todos */ SELECT `+todoColumns+` FROM todos
		WHERE user_id = $1 AND conversation_id = $2 ORDER BY created_at, id LIMIT $3`, o.UserID, o.ConversationID, MaxTodos)
	if err != nil {
		return nil, fmt.Errorf("memory: todos: %w", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Todo, error) { return scanTodo(r) })
	if err != nil {
		return nil, fmt.Errorf("memory: todos: %w", err)
	}
	return ts, nil
}

// PruneTodos removes the todo lists of conversations with no change (an add, a write, a
// rename, a status change) for keep, pruneBatch lists a transaction, and returns the todos removed.
// Each list's lock (lockList) is taken before it is checked again and removed, so a
// change that commits meanwhile keeps it. Not audited, as the other retention steps
// (the assistant's conversations, ended grants): the log keeps each list's changes.
func (s *Service) PruneTodos(ctx context.Context, keep time.Duration) (int64, error) {
	var removed int64
	for {
		var lists int
		var n int64
		err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
			// The subquery's order is the order the locks are taken in: two runs never
			// wait on each other crosswise, and a change holds one list's lock only.
			rows, err := tx.Query(ctx, `/* memory.PruneTodos.stale */ SELECT user_id, conversation_id,
					pg_advisory_xact_lock(hashtextextended('todos:' || user_id || ':' || conversation_id, 0))
				FROM (SELECT user_id, conversation_id FROM todos GROUP BY user_id, conversation_id
					HAVING max(greatest(created_at, done_at, changed_at)) < now() - $1::interval
					ORDER BY user_id, conversation_id LIMIT $2) stale`, keep, pruneBatch)
			if err != nil {
				return err
			}
			var users, convs []string
			var u, c string
			if _, err := pgx.ForEachRow(rows, []any{&u, &c, nil}, func() error {
				users, convs = append(users, u), append(convs, c)
				return nil
			}); err != nil {
				return err
			}
			lists = len(users)
			if lists == 0 {
				return nil
			}
			tag, err := tx.Exec(ctx, `/* memory.PruneTodos */ DELETE FROM todos t USING unnest($1::text[], $2::text[]) AS l(u, c)
				WHERE t.user_id = l.u AND t.conversation_id = l.c AND NOT EXISTS (SELECT 1 FROM todos r
					WHERE r.user_id = l.u AND r.conversation_id = l.c AND greatest(r.created_at, r.done_at, r.changed_at) >= now() - $3::interval)`,
				users, convs, keep)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			return nil
		})
		if err != nil {
			return removed, fmt.Errorf("memory: prune todos: %w", err)
		}
		removed += n
		if lists < pruneBatch {
			return removed, nil
		}
	}
}
