package tools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Category files tools (seed 004 tool_categories). AutoEnable enables validated tools in
// it without a person (off by default).
type Category struct {
	ID          string    `db:"id" json:"id"`
	Name        string    `db:"name" json:"name"`
	Description string    `db:"description" json:"description"`
	AutoEnable  bool      `db:"auto_enable" json:"auto_enable"`
	Tools       int       `db:"tools" json:"tools"`
	CreatedAt   time.Time `db:"created_at" json:"created_at"`
	// UpdatedAt is the version an edit sends back (CategoryInput.ExpectUpdatedAt).
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

// CodeStaleCategory is the code of a change based on a category that changed since
// (CategoryInput.ExpectUpdatedAt); its details are the category as it is now.
const CodeStaleCategory = "stale_category"

// staleCategory: the category changed since the caller read it.
func staleCategory(c Category) *fault.Error {
	return fault.Stale(CodeStaleCategory, fmt.Sprintf("category %s changed since you read it (saved again at %s); read it again to see the changes and apply yours to it",
		c.Name, c.UpdatedAt.UTC().Format(time.DateTime+" UTC"))).About("category").WithDetails(c)
}

// CategoryInput creates or changes a category.
type CategoryInput struct {
	Name        string
	Description string
	AutoEnable  bool
	// ExpectUpdatedAt, when set, is the updated_at a change was based on: a newer one
	// (someone saved meanwhile) fails with a CodeStaleCategory fault instead of undoing it.
	ExpectUpdatedAt *time.Time
}

var categoryRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,47}$`)

func (in *CategoryInput) check() error { return in.checkKeeping(nil) }

// checkKeeping is check, except that a description equal to *kept (the stored one) is
// not judged as text: one stored before these rules stays, so a change to another field
// (auto-enable) is not refused for it.
func (in *CategoryInput) checkKeeping(kept *string) error {
	e := &verr.Error{}
	in.Name = strings.ToLower(strings.TrimSpace(in.Name))
	in.Description = strings.TrimSpace(in.Description)
	switch {
	case in.Name == "":
		e.Add("name", "is required")
	case in.Name == "none":
		e.Add("name", `"none" is reserved (it filters tools without a category)`)
	case !categoryRE.MatchString(in.Name):
		e.Add("name", "use 1 to 48 lowercase letters, digits and dashes, starting with a letter or digit")
	}
	if utf8.RuneCountInString(in.Description) > 500 { // characters, as the form's maxlength counts them
		e.Add("description", "is too long (at most 500 characters)")
	} else if kept == nil || in.Description != strings.TrimSpace(*kept) {
		// The form's field is one line (<input type="text">): no line breaks either.
		if why := BadDescription(in.Description, false); why != "" {
			e.Add("description", why)
		}
	}
	return e.Err()
}

// BadDescription says why s cannot be a description shown to everyone (a category's, a
// server's), or "": text PostgreSQL cannot store, a control character (ESC, which a
// terminal acts on) or an invisible format character (U+202E, which reverses what
// follows it on the page). Tab is allowed, and line breaks (LF, or CR LF as a browser's
// textarea sends them) when multiLine. Zero-width (non-)joiners are allowed: Persian
// and Indic scripts, and emoji sequences, are written with them.
func BadDescription(s string, multiLine bool) string {
	allow := textcheck.AllowTab | textcheck.AllowJoiners
	if multiLine {
		allow |= textcheck.AllowNewlines
	}
	return textcheck.Readable(s, "a description", allow)
}

// Categories lists the categories with how many tools each holds.
func (s *Service) Categories(ctx context.Context) ([]Category, error) {
	return db.All[Category](ctx, s.pool, "tools: categories", `/* tools.Categories */
		SELECT c.id::text, c.name, c.description, c.auto_enable, c.created_at, c.updated_at,
			(SELECT count(*)::int FROM mcp_tools t WHERE t.category_id = c.id) AS tools
		FROM tool_categories c ORDER BY c.name`)
}

// SaveCategory creates a category (id "") or changes one, audited. A description stored
// before the rules on hidden characters stays while it is not changed.
func (s *Service) SaveCategory(ctx context.Context, actor audit.Actor, id string, in CategoryInput) (Category, error) {
	if id == "" {
		if err := in.check(); err != nil {
			return Category{}, err
		}
	}
	var out Category
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = s.SaveCategoryTx(ctx, tx, actor, id, in)
		return err
	})
	return out, err
}

// CategoryPatch is a change to some of a category's fields: nil keeps one as it is.
type CategoryPatch struct {
	Name, Description *string
	AutoEnable        *bool
	ExpectUpdatedAt   *time.Time // as CategoryInput's
}

// PatchCategory changes the fields p gives and keeps the others, read under the row's
// lock so that a change made meanwhile to a field p leaves out is kept.
func (s *Service) PatchCategory(ctx context.Context, actor audit.Actor, id string, p CategoryPatch) (Category, error) {
	n, ok := normalID(id)
	if !ok {
		return Category{}, ErrCategoryNotFound
	}
	var out Category
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		cur, err := db.All[Category](ctx, tx, "tools: category", `/* tools.PatchCategory */
			SELECT id::text, name, description, auto_enable, created_at, updated_at, 0 AS tools
			FROM tool_categories WHERE id = $1 FOR UPDATE`, n)
		if err != nil {
			return err
		}
		if len(cur) == 0 {
			return ErrCategoryNotFound
		}
		in := CategoryInput{Name: cur[0].Name, Description: cur[0].Description, AutoEnable: cur[0].AutoEnable, ExpectUpdatedAt: p.ExpectUpdatedAt}
		if p.Name != nil {
			in.Name = *p.Name
		}
		if p.Description != nil {
			in.Description = *p.Description
		}
		if p.AutoEnable != nil {
			in.AutoEnable = *p.AutoEnable
		}
		if err := in.checkKeeping(&cur[0].Description); err != nil {
			return err
		}
		out, err = saveCategoryTx(ctx, tx, actor, n, in)
		return err
	})
	return out, err
}

// SaveCategoryTx is SaveCategory in the caller's transaction.
func (s *Service) SaveCategoryTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string, in CategoryInput) (Category, error) {
	var kept *string
	if id != "" {
		// The stored description, read to judge only a changed one (the update checks
		// the row again: a category saved or deleted meanwhile is the update's to say).
		if n, ok := normalID(id); ok {
			var d string
			err := tx.QueryRow(ctx, `/* tools.SaveCategory.kept */ SELECT description FROM tool_categories WHERE id = $1`, n).Scan(&d)
			if err == nil {
				kept = &d
			} else if !errors.Is(err, pgx.ErrNoRows) {
				return Category{}, fmt.Errorf("tools: save category: %w", err)
			}
		}
	}
	if err := in.checkKeeping(kept); err != nil {
		return Category{}, err
	}
	return saveCategoryTx(ctx, tx, actor, id, in)
}

// CheckCategory reports what is wrong with a category before it is saved, and
// normalizes it (lower case, trimmed).
func CheckCategory(in *CategoryInput) error { return in.check() }

// CheckCategoryKeeping is CheckCategory for a category whose stored description is
// *kept (nil: a new one): a description equal to it is not judged as text, so one stored
// before the rules on hidden characters stays while it is not changed.
func CheckCategoryKeeping(in *CategoryInput, kept *string) error { return in.checkKeeping(kept) }

func saveCategoryTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string, in CategoryInput) (Category, error) {
	var out Category
	err := func() error {
		var rows pgx.Rows
		var err error
		action := "category.update"
		if id == "" {
			action = "category.create"
			rows, err = tx.Query(ctx, `/* tools.SaveCategory.insert */ INSERT INTO tool_categories (id, name, description, auto_enable)
				VALUES ($1, $2, $3, $4) RETURNING id::text, name, description, auto_enable, created_at, updated_at, 0 AS tools`,
				uuid.NewString(), in.Name, in.Description, in.AutoEnable)
		} else {
			// Other spellings of a UUID (urn:uuid:…, {…}) are unknown ids, as for tools:
			// PostgreSQL takes some of them and refuses others.
			n, ok := normalID(id)
			if !ok {
				return ErrCategoryNotFound
			}
			id = n
			// updated_at is the version edit forms send back: every save moves it, even two
			// in the same microsecond. Checked in the WHERE, a save committed meanwhile wins.
			rows, err = tx.Query(ctx, `/* tools.SaveCategory.update */ UPDATE tool_categories SET name = $2, description = $3,
				auto_enable = $4, updated_at = GREATEST(now(), updated_at + interval '1 microsecond')
				WHERE id = $1 AND ($5::timestamptz IS NULL OR updated_at = $5)
				RETURNING id::text, name, description, auto_enable, created_at, updated_at,
					(SELECT count(*)::int FROM mcp_tools t WHERE t.category_id = $1) AS tools`,
				id, in.Name, in.Description, in.AutoEnable, in.ExpectUpdatedAt)
		}
		if err != nil {
			return fmt.Errorf("tools: save category: %w", err)
		}
		out, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Category])
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "23505":
			return verr.New("name", fmt.Sprintf("a category named %q exists already", in.Name))
		case errors.Is(err, pgx.ErrNoRows) && id != "" && in.ExpectUpdatedAt != nil:
			// Gone, or saved since: say which.
			cur, gerr := db.All[Category](ctx, tx, "tools: category", `/* tools.SaveCategory.current */
				SELECT id::text, name, description, auto_enable, created_at, updated_at,
					(SELECT count(*)::int FROM mcp_tools t WHERE t.category_id = $1) AS tools
				FROM tool_categories WHERE id = $1`, id)
			if gerr != nil {
				return gerr
			}
			if len(cur) == 0 {
				return ErrCategoryNotFound
			}
			return staleCategory(cur[0])
		case errors.Is(err, pgx.ErrNoRows):
			return ErrCategoryNotFound
		case err != nil:
			return fmt.Errorf("tools: save category: %w", err)
		}
		if _, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: "category",
			TargetID: out.ID, TargetName: out.Name, Payload: map[string]any{"name": out.Name,
				"description": out.Description, "auto_enable": out.AutoEnable}}); err != nil {
			return err
		}
		// The list's category filter (tools.Facets) follows it.
		_, err = events.CategoryChanged.Publish(ctx, tx, Topic, events.CategoryRef{ID: out.ID, Name: out.Name})
		return err
	}()
	return out, err
}

// DeleteCategory removes a category; its tools keep working, without a category.
func (s *Service) DeleteCategory(ctx context.Context, actor audit.Actor, id string) error {
	id, ok := normalID(id)
	if !ok {
		return ErrCategoryNotFound
	}
	// Retried: its tools' rows are set free of it in no order a tool's update shares.
	return db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
		return deleteCategoryTx(ctx, tx, actor, id)
	})
}

// DeleteCategoryTx is DeleteCategory in the caller's transaction.
func (s *Service) DeleteCategoryTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string) error {
	id, ok := normalID(id)
	if !ok {
		return ErrCategoryNotFound
	}
	return deleteCategoryTx(ctx, tx, actor, id)
}

func deleteCategoryTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string) error {
	var name string
	var n int
	err := tx.QueryRow(ctx, `/* tools.DeleteCategory */ WITH gone AS (DELETE FROM tool_categories WHERE id = $1 RETURNING name)
		SELECT name, (SELECT count(*)::int FROM mcp_tools WHERE category_id = $1) FROM gone`, id).Scan(&name, &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrCategoryNotFound
	}
	if err != nil {
		return fmt.Errorf("tools: delete category: %w", err)
	}
	if _, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "category.delete", TargetType: "category",
		TargetID: id, TargetName: name, Payload: map[string]any{"tools_uncategorized": n}}); err != nil {
		return err
	}
	_, err = events.CategoryChanged.Publish(ctx, tx, Topic, events.CategoryRef{ID: id, Name: name, Deleted: true})
	return err
}

// Tags lists every tag with how many tools carry it, most used first.
func (s *Service) Tags(ctx context.Context) ([]Facet, error) {
	return db.All[Facet](ctx, s.pool, "tools: tags", `/* tools.Tags */
		SELECT tag AS value, count(*)::int AS count FROM tool_tags GROUP BY tag ORDER BY count(*) DESC, tag`)
}
