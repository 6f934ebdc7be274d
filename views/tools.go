package views

import (
	"html"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
)

// ToolCard is one tool as the list, live updates and the detail header show it. It is
// the same for every viewer; role-specific controls carry data-perm.
type ToolCard struct {
	ID            string
	Name          string
	QualifiedName string
	Title         string
	Description   string
	Server        string
	ServerID      string
	Status        string // persistent tool state (docs/architecture.md, State machines)
	Available     bool   // the server still lists it
	Risk          string // low, medium, high
	RiskWhy       string
	RiskSource    string // override, annotations
	Category      string
	Tags          []string
	Version       string
	Worst         string // worst validation finding: critical, error, warning, info, or ""
	Override      string // why an administrator enabled it despite its findings
	// Picked: ticked for a bulk action that was refused, so the page comes back with it
	// still ticked (never set in live updates).
	Picked bool
	// DefinitionHash is the definition shown: the tool page's enable forms send it back.
	DefinitionHash string
}

// Enabled reports whether the tool can be called.
func (t ToolCard) Enabled() bool { return t.Status == "enabled" }

// ToolFilter is the search, filters and order of the tool list.
type ToolFilter struct {
	Q        string
	Server   string
	Category string
	Status   string
	Tags     []string
	Risk     string
	Sort     string
}

// ToolsPage is the tool list: one page of cards, never more.
type ToolsPage struct {
	Layout
	Tools      []ToolCard
	Filter     ToolFilter
	Total      int // matching the filter
	All        int // in all
	Servers    []Option
	Categories []Option
	Statuses   []Option
	TagOpts    []Option
	Risks      []Option
	Sorts      []Option
	NextURL    string // the next page ("" on the last)
	FirstURL   string // the first page, when this is not it
	Back       string // this page's URL, for actions to return to
	BulkTags   string // the tags typed for a bulk action that was refused
	HasFilter  bool
	Notice     string // why the filters in the address were not applied
}

// toolStatusClass is the badge class of a tool state.
func toolStatusClass(s string) string {
	switch s {
	case "enabled":
		return "badge ok"
	case "invalid", "failed":
		return "badge danger"
	case "discovered", "validating", "updating", "testing":
		return "badge warn"
	case "validated", "configured", "verified":
		return "badge info"
	}
	return "badge"
}

// toolStatusLabel is a tool state as people read it.
func toolStatusLabel(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// riskClass is the badge class of a risk level.
func riskClass(r string) string {
	switch r {
	case "low":
		return "badge ok risk"
	case "medium":
		return "badge warn risk"
	case "high":
		return "badge danger risk"
	}
	return "badge risk"
}

// riskLabel is a risk level as badges show it.
func riskLabel(r string) string {
	switch r {
	case "low", "medium", "high":
		return strings.ToUpper(r[:1]) + r[1:] + " risk"
	}
	return "Unknown risk"
}

// severityClass is the badge class of a validation finding's severity.
func severityClass(s string) string {
	switch s {
	case "critical", "error":
		return "badge danger"
	case "warning":
		return "badge warn"
	case "info":
		return "badge info"
	}
	return "badge"
}

// toolEnableAction is where the card's toggle posts.
func toolEnableAction(t ToolCard) string {
	if t.Enabled() {
		return "/tools/" + t.ID + "/disable"
	}
	if t.DefinitionHash != "" {
		// The definition the card shows: an enable of one changed since is refused. (The
		// tool page's form sends its own, which wins: a form's fields over the query.)
		return "/tools/" + t.ID + "/enable?definition_hash=" + url.QueryEscape(t.DefinitionHash)
	}
	return "/tools/" + t.ID + "/enable"
}

// canToggle reports whether the toggle can do anything: a tool that is still being
// validated or tested cannot be enabled yet, and an invalid or failed one needs the
// override on its page.
func canToggle(t ToolCard) bool {
	if !t.Enabled() && (t.Worst == "critical" || t.Worst == "error") {
		return false // only the override form on its page can enable it
	}
	switch t.Status {
	case "enabled", "disabled", "validated", "configured", "verified":
		return true
	}
	return false
}

// toggleHint says why a card has no enable toggle.
func toggleHint(t ToolCard) string {
	if !t.Enabled() && (t.Worst == "critical" || t.Worst == "error") && t.Status != "invalid" {
		return "Has " + t.Worst + " findings: open to review"
	}
	switch t.Status {
	case "invalid":
		return "Invalid: open to review its findings"
	case "failed":
		return "Its test failed: open to review"
	case "discovered", "validating":
		return "Being validated"
	case "updating":
		return "Definition changed: being validated"
	case "testing":
		return "Being tested"
	}
	return ""
}

// CategoryRow is one category of the categories page.
type CategoryRow struct {
	ID          string
	Name        string
	Description string
	AutoEnable  bool
	Tools       int
}

// CategoryForm is the add (or, with EditID, the edit) form of a category.
type CategoryForm struct {
	Name        string
	Description string
	AutoEnable  bool
}

// CategoriesPage lists the tool categories.
type CategoriesPage struct {
	Layout
	Categories []CategoryRow
	Form       CategoryForm // the add form, or the failed edit
	EditID     string       // the category whose edit failed ("" for the add form)
	Errors     FormErrors
	CanEdit    bool
}

func categoryFormOf(c CategoryRow, p CategoriesPage) CategoryForm {
	if p.EditID == c.ID {
		return p.Form
	}
	return CategoryForm{Name: c.Name, Description: c.Description, AutoEnable: c.AutoEnable}
}

func errsFor(id string, p CategoriesPage) FormErrors {
	if p.EditID == id {
		return p.Errors
	}
	return nil
}

func addForm(p CategoriesPage) CategoryForm {
	if p.EditID == "" {
		return p.Form
	}
	return CategoryForm{}
}

func addErrs(p CategoriesPage) FormErrors {
	if p.EditID == "" {
		return p.Errors
	}
	return nil
}

// breakableName is a name that breaks between its words in a narrow column
// (nameParts): its parts, escaped, joined by <wbr> with no space between them.
func breakableName(name string) templ.Component {
	parts := nameParts(name)
	for i, p := range parts {
		parts[i] = html.EscapeString(p)
	}
	return templ.Raw(strings.Join(parts, "<wbr>"))
}

// nameParts splits a tool name where a line may break: after "_", ".", "-" and "/",
// and where a lower-case letter meets an upper-case one (getWeather), so a narrow
// column breaks "weather__get_forecast" between words, never inside one.
func nameParts(name string) []string {
	var parts []string
	start := 0
	rs := []rune(name)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '_' || r == '.' || r == '-' || r == '/':
			for i+1 < len(rs) && rs[i+1] == r {
				i++
			}
			parts = append(parts, string(rs[start:i+1]))
			start = i + 1
		case i > start && unicode.IsUpper(r) && unicode.IsLower(rs[i-1]):
			parts = append(parts, string(rs[start:i]))
			start = i
		}
	}
	if start < len(rs) {
		parts = append(parts, string(rs[start:]))
	}
	return parts
}

// A tool's title and description are the server's to choose and stored whole (they are
// hashed and pinned); pages show a bounded part, in characters.
const (
	maxShownTitle       = 200
	maxShownDescription = 2000   // cards, table rows
	maxShownFullText    = 20_000 // the tool page's Overview, where the description is the content
)

// clipShown cuts s to its first n characters, marked with "…".
func clipShown(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// cutLength is the length of s in characters when clipShown(s, n) cuts it, else 0.
func cutLength(s string, n int) int {
	if len(s) <= n {
		return 0
	}
	if c := utf8.RuneCountInString(s); c > n {
		return c
	}
	return 0
}
