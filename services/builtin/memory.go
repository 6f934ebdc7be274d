package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/memory"
)

// Memory is the tool memory_operations (seed 000): notes the agent keeps for the person
// it works for and finds again by full-text search, and the conversation's todo list.
func Memory(m *memory.Service) Tool {
	text := map[string]any{"type": "string"}
	// A todo's title, bounded as memory bounds it: without a bound, padding that
	// memory trims away would still reach it, megabytes in each of 500 items.
	title := map[string]any{"type": "string", "maxLength": memory.MaxTitle}
	id := map[string]any{"type": "string", "description": "the id store, list or todo_add answered"}
	limit := map[string]any{"type": "integer", "minimum": 1, "maximum": memory.MaxResults, "description": "at most this many"}
	owner := func(c Call) memory.Owner {
		return memory.Owner{UserID: c.UserID, UserName: c.UserName, ConversationID: c.ConversationID,
			ActorKind: c.ActorKind, TokenID: c.TokenID}
	}
	run := func(f func(ctx context.Context, c Call, in memoryArgs) (string, any, error)) func(context.Context, Call, json.RawMessage) (*mcp.CallToolResult, error) {
		return func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
			var in memoryArgs
			if err := json.Unmarshal(args, &in); err != nil {
				return errorResult("arguments: " + err.Error()), nil
			}
			text, structured, err := f(ctx, c, in)
			if err != nil {
				return errorResult(err.Error()), nil
			}
			res := textResult(text)
			res.StructuredContent = structured
			return res, nil
		}
	}
	search := Operation{Name: "search", Description: "find notes by words (full-text, best first)",
		Properties: map[string]any{"query": map[string]any{"type": "string", "minLength": 1, "maxLength": 1000,
			"description": `words to look for ("a phrase", -not, or)`}, "limit": limit},
		Required: []string{"query"},
		Display:  func(a map[string]any) string { return "Searching memory: " + clip(str(a["query"]), 60) },
		Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
			found, err := m.Search(ctx, owner(c), in.Query, in.Limit)
			if err != nil {
				return "", nil, err
			}
			return memoriesAnswer(found, "No note matches "+in.Query+".", "search with narrower words or for one of their tags")
		})}
	searchMemory := search
	searchMemory.Name, searchMemory.Description = "search_memory", "the same as search"
	return Tool{
		Name:        "memory_operations",
		Title:       "Memory",
		Description: "Keep notes for the person you work for and find them again later (in any conversation), and keep this conversation's todo list.",
		// It changes only the notes it keeps for the person, so medium; its reads are low
		// and delete, which forgets a note for good, high (OperationRisk, ArgumentRisk).
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)},
		Operations: []Operation{
			{Name: "store", Description: "keep a note",
				Properties: map[string]any{"content": map[string]any{"type": "string", "minLength": 1, "maxLength": memory.MaxContent,
					"description": "what to remember"}, "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string", "maxLength": memory.MaxTag}, "maxItems": memory.MaxTags,
					"description": "words to find it by"}},
				Required: []string{"content"},
				Display:  func(a map[string]any) string { return "Remembering: " + clip(str(a["content"]), 60) },
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					got, err := m.Store(ctx, owner(c), in.Content, in.Tags)
					if err != nil {
						return "", nil, err
					}
					return "Stored note " + got.ID + ".", map[string]any{"memory": got}, nil
				})},
			search,
			searchMemory,
			{Name: "list", Description: "the newest notes, optionally those with one tag",
				Properties: map[string]any{"tag": map[string]any{"type": "string", "maxLength": memory.MaxTag, "description": "only notes with this tag"},
					"limit": limit},
				Display: func(a map[string]any) string { return "Listing memory" },
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					found, err := m.List(ctx, owner(c), in.Tag, in.Limit)
					if err != nil {
						return "", nil, err
					}
					return memoriesAnswer(found, "No notes yet.", "list those with one tag, or search for their words")
				})},
			{Name: "delete", Description: "forget a note", Properties: map[string]any{"id": id}, Required: []string{"id"},
				Display: func(a map[string]any) string { return "Forgetting note " + str(a["id"]) },
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					if err := m.Delete(ctx, owner(c), in.ID); err != nil {
						return "", nil, err
					}
					return "Deleted note " + in.ID + ".", map[string]any{"deleted": in.ID}, nil
				})},
			{Name: "todo_add", Description: "add an item to this conversation's todo list",
				Properties: map[string]any{"title": map[string]any{"type": "string", "minLength": 1, "maxLength": memory.MaxTitle, "description": "the task"}},
				Required:   []string{"title"},
				Display:    func(a map[string]any) string { return "Adding todo: " + clip(str(a["title"]), 60) },
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					t, err := m.AddTodo(ctx, owner(c), in.Title)
					if err != nil {
						return "", nil, err
					}
					return fmt.Sprintf("Added todo %s: %s", t.ID, t.Title), map[string]any{"todo": t}, nil
				})},
			{Name: "todo_complete", Description: "mark an item of the todo list done", Properties: map[string]any{"id": id},
				Required: []string{"id"},
				Display:  func(a map[string]any) string { return "Completing todo " + str(a["id"]) },
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					t, err := m.CompleteTodo(ctx, owner(c), in.ID)
					if err != nil {
						return "", nil, err
					}
					return "Completed: " + t.Title, map[string]any{"todo": t}, nil
				})},
			{Name: "manage_todos", Description: "seed 000's todo list in one operation: action read (the list), write (replace it with todos) or update (change the todos named by id: title, status)",
				Properties: map[string]any{
					"action": map[string]any{"type": "string", "enum": []string{"read", "write", "update"}, "description": "what to do with the list"},
					"todos": map[string]any{"type": "array", "maxItems": 500, "description": "write: the whole list; update: the todos to change",
						"items": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
							"id": text, "title": title,
							"status": map[string]any{"type": "string", "enum": memory.TodoStatuses}}}},
				},
				Required: []string{"action"},
				Display:  todosDisplay,
				Run: run(func(ctx context.Context, c Call, in memoryArgs) (string, any, error) {
					var list []memory.Todo
					var err error
					switch in.Action {
					case "write":
						list, err = m.WriteTodos(ctx, owner(c), in.Todos)
					case "update":
						if _, err = m.UpdateTodos(ctx, owner(c), in.Todos); err == nil {
							list, err = m.Todos(ctx, owner(c))
						}
					default:
						list, err = m.Todos(ctx, owner(c))
					}
					if err != nil {
						return "", nil, err
					}
					return todosText(list), map[string]any{"todos": list}, nil
				})},
			{Name: "todo_list", Description: "this conversation's todo list",
				Display: func(map[string]any) string { return "Reading todo list" },
				Run: run(func(ctx context.Context, c Call, _ memoryArgs) (string, any, error) {
					list, err := m.Todos(ctx, owner(c))
					if err != nil {
						return "", nil, err
					}
					return todosText(list), map[string]any{"todos": list}, nil
				})},
		},
	}
}

type memoryArgs struct {
	Content string              `json:"content"`
	Tags    []string            `json:"tags"`
	Query   string              `json:"query"`
	Tag     string              `json:"tag"`
	Limit   int                 `json:"limit"`
	ID      string              `json:"id"`
	Title   string              `json:"title"`
	Action  string              `json:"action"`
	Todos   []memory.TodoChange `json:"todos"`
}

func todosText(list []memory.Todo) string {
	if len(list) == 0 {
		return "The todo list is empty."
	}
	var b strings.Builder
	for _, t := range list {
		mark := " "
		switch t.Status {
		case memory.TodoCompleted:
			mark = "x"
		case memory.TodoInProgress:
			mark = "~"
		}
		fmt.Fprintf(&b, "[%s] %s (%s)\n", mark, t.Title, t.ID)
	}
	return strings.TrimRight(b.String(), "\n")
}

// todosDisplay is seed 000 §6's line for manage_todos: reading the list, creating it,
// starting or completing one todo, updating several.
func todosDisplay(a map[string]any) string {
	todos, _ := a["todos"].([]any)
	switch str(a["action"]) {
	case "write":
		return fmt.Sprintf("Creating todo list: %d tasks", len(todos))
	case "update":
		if len(todos) == 1 {
			t, _ := todos[0].(map[string]any)
			title := str(t["title"])
			if title == "" {
				title = str(t["id"])
			}
			switch str(t["status"]) {
			case memory.TodoCompleted:
				return "Completed: " + clip(title, 60)
			case memory.TodoInProgress:
				return "Starting: " + clip(title, 60)
			}
		}
		return fmt.Sprintf("Updating %d todos", len(todos))
	}
	return "Reading todo list"
}

// maxMemoryAnswer bounds a search or list answer, its text and its structured content
// together as sent (JSON-escaped): 50 notes of 400 KB, twice, would pass the 16 MiB an
// MCP message may have (mcpclient.DefaultMaxMessageBytes, the Go SDK's own limit), while
// 3 MiB fits whole in the 4 MiB the test panel keeps of a result.
const maxMemoryAnswer = 3 << 20

// memoriesAnswer is the text and the structured content of found notes: the first ones
// whose size together stays within maxMemoryAnswer (always the first one, at most about
// 1.2 MB), and, when some were left out, how many and how to see them (see).
func memoriesAnswer(found []memory.Memory, none, see string) (string, any, error) {
	if len(found) == 0 {
		return none, map[string]any{"memories": found}, nil
	}
	var b strings.Builder
	size := 0
	kept := make([]memory.Memory, 0, len(found))
	for _, m := range found {
		line := fmt.Sprintf("- %s (%s", m.Content, m.ID)
		if len(m.Tags) > 0 {
			line += "; tags: " + strings.Join(m.Tags, ", ")
		}
		line += ")\n"
		quoted, err := json.Marshal(line)
		if err != nil {
			return "", nil, err
		}
		structured, err := json.Marshal(m)
		if err != nil {
			return "", nil, err
		}
		n := len(quoted) + len(structured)
		if len(kept) > 0 && size+n > maxMemoryAnswer {
			break
		}
		size += n
		b.WriteString(line)
		kept = append(kept, m)
	}
	text := strings.TrimRight(b.String(), "\n")
	if left := len(found) - len(kept); left > 0 {
		were := "notes were"
		if left == 1 {
			were = "note was"
		}
		text += fmt.Sprintf("\n(%d more matching %s left out to keep this answer under %d MiB; to see them, %s.)", left, were, maxMemoryAnswer>>20, see)
	}
	return text, map[string]any{"memories": kept}, nil
}
