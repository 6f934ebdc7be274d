package gateway

// The resources and prompts of upstream servers, passed through (issue #19):
// resources/list, resources/templates/list and prompts/list merge the lists of the
// servers the caller may reach; resources/read and prompts/get go to the one server
// their name says, over its live session (mcpclient), and are audited.
//
// Server access. A caller reaches a server's resources and prompts when they may use
// at least one of its enabled tools (router.Servers: the role's tool.use unless a
// per-user permission decides, exactly as for tools/list and tools/call), and the
// server is enabled and connected. The role's server.view is not enough: it lets a
// person read a server's settings in the browser, not use what the server serves, and
// an auditor holds it without tool.use. So a per-user permission that takes a server's
// last tool away from someone takes its resources and prompts too, and a server none of
// whose tools an administrator has enabled serves nothing through the gateway.
//
// Names. A prompt is "server__prompt", like a tool. A resource keeps the upstream's
// URI behind a prefix that names the server: toolwarden://<server>/<the upstream's URI,
// verbatim>, and a template's uriTemplate gets the same prefix. Server names are
// lowercase slugs ([a-z0-9-]), a valid URI authority, and they hold no "/", so the
// first "/" after the prefix ends the server's name and everything after it is the
// upstream's URI, byte for byte: unwrapping cannot be ambiguous, and needs no
// knowledge of what other servers offer (keeping URIs as the upstreams gave them
// would work only while no two reachable servers used the same URI, which is neither
// deterministic nor the same for every caller). Percent-encoding the upstream's URI
// into one path segment would round-trip a resource too, but not a template: its
// "{var}" expressions must stay as they are to be expanded, and what a client's
// expansion percent-encodes could then not be told apart from what the wrapping
// encoded. A verbatim prefix is a literal before the expressions, so the prefixed
// template is a valid RFC 6570 template whenever the upstream's was, and expanding it
// gives the prefix followed by exactly what expanding the upstream's would have. The
// wrapped URI is a valid URI whenever the upstream's was (the upstream's scheme and
// "//" land in the path, where ":" and empty segments are allowed).

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
)

const (
	// uriPrefix starts every resource URI and template the gateway hands out.
	uriPrefix = "toolwarden://"
	// pageSize is how many items one page of a merged list holds.
	pageSize = 100
	// fetchParallel bounds the servers asked for their lists at once.
	fetchParallel = 4
	// auditWait bounds the write of an audit row, also after the client went away.
	auditWait = 5 * time.Second
	// codeRateLimited is the JSON-RPC error of a read or get over the caller's rate.
	codeRateLimited = -32029
)

// passthrough is what the pass-through needs beyond the gateway's router: the
// upstream sessions and where audit rows are written. Without sessions the lists are
// empty and reads and gets fail.
type passthrough struct {
	sessions *mcpclient.Manager
	journal  db.TxBeginner
}

// passthrough answers the resource and prompt methods for the request's caller;
// every other method goes on.
func (g *Gateway) passthrough(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list", "resources/templates/list", "prompts/list", "resources/read", "prompts/get":
		default:
			return next(ctx, method, req)
		}
		c := callerOf(req)
		if c == nil {
			return nil, errNoCaller
		}
		switch r := req.(type) {
		case *mcp.ListResourcesRequest:
			cursor := ""
			if r.Params != nil {
				cursor = r.Params.Cursor
			}
			return g.listResources(ctx, c, cursor)
		case *mcp.ListResourceTemplatesRequest:
			cursor := ""
			if r.Params != nil {
				cursor = r.Params.Cursor
			}
			return g.listTemplates(ctx, c, cursor)
		case *mcp.ListPromptsRequest:
			cursor := ""
			if r.Params != nil {
				cursor = r.Params.Cursor
			}
			return g.listPrompts(ctx, c, cursor)
		case *mcp.ReadResourceRequest:
			if r.Params != nil {
				return g.readResource(ctx, c, r)
			}
		case *mcp.GetPromptRequest:
			if r.Params != nil {
				return g.getPrompt(ctx, c, r)
			}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
}

// private is the cache hint of every answer: it is the caller's own, and changes with
// their permissions and the upstreams.
var private = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}

func (g *Gateway) listResources(ctx context.Context, c *caller, cursor string) (*mcp.ListResourcesResult, error) {
	items, next, err := pageOf(ctx, g, c, listing[mcp.Resource]{kind: "resources",
		fetch: g.pass.sessions.ListResources, key: func(r *mcp.Resource) string { return r.URI },
		wrap: func(server string, m secrets.Maskers, r *mcp.Resource) *mcp.Resource {
			return &mcp.Resource{URI: wrapURI(server, m.String(r.URI)), Name: toolname.Join(server, m.String(r.Name)),
				Title: m.String(r.Title), Description: m.String(r.Description), MIMEType: r.MIMEType, Size: r.Size,
				Annotations: r.Annotations, Icons: r.Icons}
		}}, cursor)
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourcesResult{Resources: items, NextCursor: next, Cacheable: private}, nil
}

func (g *Gateway) listTemplates(ctx context.Context, c *caller, cursor string) (*mcp.ListResourceTemplatesResult, error) {
	items, next, err := pageOf(ctx, g, c, listing[mcp.ResourceTemplate]{kind: "templates",
		fetch: g.pass.sessions.ListResourceTemplates, key: func(t *mcp.ResourceTemplate) string { return t.URITemplate },
		wrap: func(server string, m secrets.Maskers, t *mcp.ResourceTemplate) *mcp.ResourceTemplate {
			return &mcp.ResourceTemplate{URITemplate: wrapURI(server, m.String(t.URITemplate)),
				Name: toolname.Join(server, m.String(t.Name)), Title: m.String(t.Title), Description: m.String(t.Description),
				MIMEType: t.MIMEType, Annotations: t.Annotations, Icons: t.Icons}
		}}, cursor)
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: items, NextCursor: next, Cacheable: private}, nil
}

func (g *Gateway) listPrompts(ctx context.Context, c *caller, cursor string) (*mcp.ListPromptsResult, error) {
	items, next, err := pageOf(ctx, g, c, listing[mcp.Prompt]{kind: "prompts",
		fetch: g.pass.sessions.ListPrompts, key: func(p *mcp.Prompt) string { return p.Name },
		wrap: func(server string, m secrets.Maskers, p *mcp.Prompt) *mcp.Prompt {
			out := &mcp.Prompt{Name: toolname.Join(server, p.Name), Title: m.String(p.Title), Description: m.String(p.Description),
				Icons: p.Icons}
			for _, a := range p.Arguments {
				if a != nil {
					out.Arguments = append(out.Arguments, &mcp.PromptArgument{Name: a.Name, Title: m.String(a.Title),
						Description: m.String(a.Description), Required: a.Required})
				}
			}
			return out
		}}, cursor)
	if err != nil {
		return nil, err
	}
	return &mcp.ListPromptsResult{Prompts: items, NextCursor: next, Cacheable: private}, nil
}

// listing is one kind of list: how to fetch one server's, and the namespaced copy of
// an item. Items are ordered by the key of their copy, which the cursor holds.
type listing[T any] struct {
	kind  string // "resources", "templates", "prompts": a cursor is for one kind
	fetch func(ctx context.Context, serverID string) ([]*T, *secrets.Masker, error)
	key   func(*T) string
	wrap  func(server string, m secrets.Maskers, it *T) *T
}

// pageOf is one page of the merged list: the reachable servers by name, the items of
// each by key, from just after the cursor's position. The cursor names the last item
// given (its server and key), so a page follows on correctly when servers or items
// came or went in between; a server that cannot list is left out of the page and
// logged.
func pageOf[T any](ctx context.Context, g *Gateway, c *caller, l listing[T], cursor string) ([]*T, string, error) {
	after, err := decodeCursor(l.kind, cursor)
	if err != nil {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: pass nextCursor as it came"}
	}
	if err := g.throttle(c); err != nil {
		return nil, "", err
	}
	servers, err := g.reachable(ctx, c)
	if err != nil {
		g.log.Error("gateway: list "+l.kind, "err", err)
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the list could not be read; it was logged"}
	}
	servers = serversFrom(servers, after)
	out := make([]*T, 0, pageSize)
	var last position
	for len(servers) > 0 {
		batch := servers[:min(fetchParallel, len(servers))]
		servers = servers[len(batch):]
		lists := make([][]*T, len(batch))
		var wg sync.WaitGroup
		for i, sv := range batch {
			wg.Go(func() { lists[i] = fetchSorted(ctx, g, l, sv) })
		}
		wg.Wait()
		for i, sv := range batch {
			for _, it := range lists[i] {
				k := l.key(it)
				if after != nil && sv.Name == after.Server && k <= after.Key {
					continue
				}
				if len(out) == pageSize {
					return out, encodeCursor(l.kind, last), nil
				}
				out = append(out, it)
				last = position{Server: sv.Name, Key: k}
			}
		}
	}
	return out, "", nil
}

// serversFrom are servers in the order pages walk them, from the one the cursor after
// names on (all of them for the first page). The order is the names' bytes, as the
// cursor compares them: the database's ORDER BY follows its collation, which under a
// libc locale such as en_US.utf8 ignores hyphens ("ab" < "a-z" < "ac"), so a page
// ending inside one server would drop or repeat others.
func serversFrom(servers []router.ServerAccess, after *position) []router.ServerAccess {
	slices.SortFunc(servers, func(a, b router.ServerAccess) int { return strings.Compare(a.Name, b.Name) })
	if after == nil {
		return servers
	}
	return slices.DeleteFunc(servers, func(s router.ServerAccess) bool { return s.Name < after.Server })
}

// fetchSorted is server sv's list, namespaced and masked, by key without repeats; nil
// when it cannot be listed now.
func fetchSorted[T any](ctx context.Context, g *Gateway, l listing[T], sv router.ServerAccess) []*T {
	if g.pass.sessions == nil {
		return nil
	}
	items, used, err := l.fetch(ctx, sv.ID)
	m := g.masks(sv.ID, used)
	if err != nil {
		if !errors.Is(err, mcpclient.ErrNotConnected) && ctx.Err() == nil {
			// The error quotes the upstream's own message, which may echo the secrets
			// its session runs with: the log gets them masked (docs/security.md).
			g.log.Warn("gateway: an upstream's list left out", "server", sv.Name, "list", l.kind, "err", m.String(err.Error()))
		}
		return nil
	}
	out := make([]*T, 0, len(items))
	for _, it := range items {
		out = append(out, l.wrap(sv.Name, m, it))
	}
	slices.SortStableFunc(out, func(a, b *T) int { return cmp.Compare(l.key(a), l.key(b)) })
	return slices.CompactFunc(out, func(a, b *T) bool { return l.key(a) == l.key(b) })
}

// reachable are the servers whose resources and prompts the caller may reach, by name
// (see the package's notes on server access); whether each is connected shows when it
// is asked.
func (g *Gateway) reachable(ctx context.Context, c *caller) ([]router.ServerAccess, error) {
	all, err := g.router.Servers(ctx, c.actor(), c.p.User.Role)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(s router.ServerAccess) bool { return !s.Allowed }), nil
}

// position is where a page ended: the last item's server and key.
type position struct {
	Kind   string `json:"l"`
	Server string `json:"s"`
	Key    string `json:"k"`
}

func encodeCursor(kind string, p position) string {
	p.Kind = kind
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of kind; nil for "" (the first page).
func decodeCursor(kind, cursor string) (*position, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, err
	}
	var p position
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	if p.Kind != kind || p.Server == "" {
		return nil, errors.New("gateway: a cursor of another list")
	}
	return &p, nil
}

// wrapURI is the URI (or URI template) the gateway hands out for server's uri.
func wrapURI(server, uri string) string { return uriPrefix + server + "/" + uri }

// unwrapURI splits a URI of wrapURI into the server's name and its own URI.
func unwrapURI(uri string) (server, upstream string, ok bool) {
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok {
		return "", "", false
	}
	server, upstream, ok = strings.Cut(rest, "/")
	return server, upstream, ok && server != "" && upstream != ""
}

// use is one read or get on the way to its audit row.
type use struct {
	c       *caller
	action  string // resource.read, prompt.get
	server  router.ServerAccess
	payload map[string]any
	// used is the masker of the upstream session that answered (masks), once it did.
	used *secrets.Masker
}

func (g *Gateway) readResource(ctx context.Context, c *caller, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	server, upstream, ok := unwrapURI(uri)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"%q is not a resource of Toolwarden: its URIs are toolwarden://<server>/<the server's URI>, as resources/list and resources/templates/list give them",
			clip(uri, 200))}
	}
	u, err := g.admit(ctx, c, conversationOf(req.Session, req.Params.Meta), "resource.read", server,
		map[string]any{"uri": clip(upstream, 1000)})
	if err != nil {
		if errors.Is(err, errUnknownServer) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, err
	}
	res, used, err := g.pass.sessions.ReadResource(ctx, u.server.ID, upstream)
	u.used = used
	if err != nil {
		return nil, g.failed(ctx, u, err)
	}
	m := g.masks(u.server.ID, u.used)
	out := &mcp.ReadResourceResult{Contents: make([]*mcp.ResourceContents, 0, len(res.Contents)), Cacheable: private}
	size := 0
	for _, rc := range res.Contents {
		if rc == nil {
			continue
		}
		cp := *rc
		if cp.URI == "" {
			cp.URI = upstream
		}
		cp.URI, cp.Text, cp.Blob, cp.Meta = wrapURI(server, m.String(cp.URI)), m.String(cp.Text), maskBlob(m, cp.Blob), nil
		size += len(cp.Text) + len(cp.Blob)
		out.Contents = append(out.Contents, &cp)
	}
	u.payload["contents"], u.payload["bytes"] = len(out.Contents), size
	if err := g.succeeded(ctx, u); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *Gateway) getPrompt(ctx context.Context, c *caller, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name := req.Params.Name
	server, prompt, ok := toolname.Split(name)
	if !ok || server == "" || prompt == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"unknown prompt %q: prompts are named server__prompt, as prompts/list gives them", clip(name, 200))}
	}
	// The arguments' names, not their values: the log keeps no text a person typed
	// into a prompt.
	args := make([]string, 0, len(req.Params.Arguments))
	for k := range req.Params.Arguments {
		args = append(args, clip(k, 100))
	}
	slices.Sort(args)
	u, err := g.admit(ctx, c, conversationOf(req.Session, req.Params.Meta), "prompt.get", server,
		map[string]any{"prompt": clip(prompt, 300), "arguments": args[:min(len(args), 50)]})
	if err != nil {
		if errors.Is(err, errUnknownServer) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", clip(name, 200))}
		}
		return nil, err
	}
	res, used, err := g.pass.sessions.GetPrompt(ctx, u.server.ID, prompt, req.Params.Arguments)
	u.used = used
	if err != nil {
		return nil, g.failed(ctx, u, err)
	}
	m := g.masks(u.server.ID, u.used)
	out := &mcp.GetPromptResult{Description: m.String(res.Description), Messages: make([]*mcp.PromptMessage, 0, len(res.Messages))}
	for _, msg := range res.Messages {
		if msg != nil {
			out.Messages = append(out.Messages, &mcp.PromptMessage{Role: msg.Role, Content: contentIn(server, m, msg.Content)})
		}
	}
	u.payload["messages"] = len(out.Messages)
	if err := g.succeeded(ctx, u); err != nil {
		return nil, err
	}
	return out, nil
}

// contentIn is a prompt message's content as the gateway passes it on: text masked,
// the URIs of embedded resources and resource links namespaced like resources/list's
// (so the client can read them through the gateway), a copy in any case; a tool
// result's nested content likewise, and a type not known here replaced by a note.
func contentIn(server string, m secrets.Maskers, c mcp.Content) mcp.Content {
	switch v := c.(type) {
	case *mcp.TextContent:
		cp := *v
		cp.Text, cp.Meta = m.String(v.Text), nil
		return &cp
	case *mcp.EmbeddedResource:
		cp := *v
		cp.Meta = nil
		if v.Resource != nil {
			r := *v.Resource
			r.URI, r.Text, r.Blob, r.Meta = wrapURI(server, m.String(r.URI)), m.String(r.Text), maskBlob(m, r.Blob), nil
			cp.Resource = &r
		}
		return &cp
	case *mcp.ResourceLink:
		cp := *v
		cp.URI, cp.Name, cp.Title, cp.Description, cp.Meta = wrapURI(server, m.String(v.URI)), m.String(v.Name),
			m.String(v.Title), m.String(v.Description), nil
		return &cp
	case *mcp.ImageContent:
		cp := *v
		cp.Meta = nil
		return &cp
	case *mcp.AudioContent:
		cp := *v
		cp.Meta = nil
		return &cp
	case *mcp.ToolUseContent:
		// The SDK decodes a prompt message's content without a type filter, so a
		// sampling-only type comes through too: its arguments are the upstream's text.
		cp := *v
		cp.ID, cp.Name, cp.Meta = m.String(v.ID), m.String(v.Name), nil
		cp.Input = nil
		var in map[string]any
		if b, err := json.Marshal(v.Input); err == nil && json.Unmarshal(m.JSON(b), &in) == nil {
			cp.Input = in
		}
		return &cp
	case *mcp.ToolResultContent:
		cp := *v
		cp.ToolUseID, cp.Meta, cp.StructuredContent = m.String(v.ToolUseID), nil, nil
		cp.Content = make([]mcp.Content, 0, len(v.Content))
		for _, nested := range v.Content {
			cp.Content = append(cp.Content, contentIn(server, m, nested))
		}
		if v.StructuredContent != nil {
			if b, err := json.Marshal(v.StructuredContent); err == nil {
				cp.StructuredContent = json.RawMessage(m.JSON(b))
			}
		}
		return &cp
	}
	// A type this code does not know is not passed on unread: it could carry the
	// upstream's secrets or URIs in fields nothing here masks.
	return &mcp.TextContent{Text: fmt.Sprintf("(Toolwarden left out content of a type it does not pass on: %s.)", contentType(c))}
}

// contentType names c's MCP type, as its JSON says, for the note that replaces it.
func contentType(c mcp.Content) string {
	if c == nil {
		return "none"
	}
	b, err := c.MarshalJSON()
	var wire struct {
		Type string `json:"type"`
	}
	if err != nil || json.Unmarshal(b, &wire) != nil || wire.Type == "" {
		return fmt.Sprintf("%T", c)
	}
	return clip(wire.Type, 50)
}

// maskBlob masks a resource's binary contents when they are UTF-8 text
// (secrets.MaskUTF8); the upstream's message cap bounds the work.
func maskBlob(m secrets.Maskers, b []byte) []byte {
	if m.Empty() {
		return b
	}
	return secrets.MaskUTF8(b, m.String)
}

// errUnknownServer: the name is of no server with a tool that can be called now.
var errUnknownServer = errors.New("gateway: unknown server")

// throttle spends one of the caller's calls a minute (their tool calls' budget) on a
// request that is no tool call but costs the upstream servers or the database as much:
// a read, a list (each page asks every reachable server), a held wait. Refused, it is
// a JSON-RPC error naming the wait, and not audited, so a flood cannot flood the log.
func (g *Gateway) throttle(c *caller) *jsonrpc.Error {
	err := g.router.Throttle(c.actor())
	if err == nil {
		return nil
	}
	msg := err.Error()
	if f, ok := fault.As(err); ok {
		msg = f.Message
	}
	return &jsonrpc.Error{Code: codeRateLimited, Message: "rate limited: " + msg}
}

// admit decides whether the caller may read or get from server now: within their call
// rate (a refusal for rate is not audited, so a flood of requests cannot flood the
// log), a server with a tool that can be called (errUnknownServer, not audited), one
// they may reach (otherwise denied, audited, and answered errUnknownServer too).
func (g *Gateway) admit(ctx context.Context, c *caller, conversation, action, server string, payload map[string]any) (*use, error) {
	if err := g.throttle(c); err != nil {
		return nil, err
	}
	servers, err := g.router.Servers(ctx, c.actor(), c.p.User.Role)
	if err != nil {
		g.log.Error("gateway: "+action, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server access could not be read; it was logged"}
	}
	i := slices.IndexFunc(servers, func(s router.ServerAccess) bool { return s.Name == server })
	if i < 0 {
		return nil, errUnknownServer
	}
	payload["source"] = router.SourceGateway
	if conversation != "" {
		payload["conversation_id"] = clip(conversation, 200)
	}
	u := &use{c: c, action: action, server: servers[i], payload: payload}
	if !u.server.Allowed {
		u.payload["reason"] = "the user may use none of the server's enabled tools"
		if err := g.record(ctx, u, audit.ResultDenied); err != nil {
			g.log.Error("gateway: record a denial", "action", action, "server", server, "err", err)
		}
		// Answered as a server that does not exist, as tools/call answers its tools:
		// the lists hide it, and so does this (the audit keeps the denial).
		return nil, errUnknownServer
	}
	if g.pass.sessions == nil {
		return nil, g.failed(ctx, u, mcpclient.ErrNotConnected)
	}
	return u, nil
}

// conversationOf is a request's conversation, as tools/call records it: the client's
// _meta.conversation_id, else the MCP session's id.
func conversationOf(s *mcp.ServerSession, meta mcp.Meta) string {
	if id, ok := meta["conversation_id"].(string); ok && id != "" {
		return id
	}
	if s != nil {
		return s.ID()
	}
	return ""
}

// masker hides server id's secret values (its session's environment and headers) in
// what the server says, as the router does in tool results.
func (g *Gateway) masker(id string) *secrets.Masker {
	if g.pass.sessions == nil {
		return nil
	}
	return g.pass.sessions.Masker(id)
}

// masks mask what one request to server id answered: with used, the masker of the
// session that answered, which the manager hands back with the answer. A Refresh (a
// rotated key) may replace the session at any time, so the server's masker asked before
// or after could lack the secrets the answering one ran with (or be none for a moment);
// it is used only when no session answered (not connected: the error is Toolwarden's).
func (g *Gateway) masks(id string, used *secrets.Masker) secrets.Maskers {
	if used == nil {
		used = g.masker(id)
	}
	return secrets.Maskers{used}
}

// failed records a read or get the server did not answer, and returns what the client
// is told: the server's own JSON-RPC error (its code, its message, the server named),
// or why there was no answer.
func (g *Gateway) failed(ctx context.Context, u *use, err error) error {
	m := g.masks(u.server.ID, u.used)
	we, answered := mcpclient.ServerError(err)
	var out *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		out = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cancelled by the client"}
	case errors.Is(err, mcpclient.ErrResultTooLarge), errors.Is(err, mcpclient.ErrTimeout),
		errors.Is(err, mcpclient.ErrNotConnected), errors.Is(err, mcpclient.ErrNotOffered):
		out = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s: %s", u.server.Name, m.String(lastClause(err)))}
	case answered:
		out = &jsonrpc.Error{Code: upstreamCode(we.Code), Message: fmt.Sprintf("server %s: %s", u.server.Name, m.String(we.Message))}
	default:
		out = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s failed: %s", u.server.Name, m.String(lastClause(err)))}
	}
	u.payload["error"] = clip(out.Message, 500)
	if rerr := g.record(ctx, u, audit.ResultFailure); rerr != nil {
		g.log.Error("gateway: record a failure", "action", u.action, "server", u.server.Name, "err", rerr)
	}
	return out
}

// upstreamCode is the code an upstream's JSON-RPC error is passed on with: its own,
// unless the code speaks of the client's exchange with Toolwarden rather than of the
// read or get. Those become -32603, the message kept: a client would take them for
// Toolwarden's own, which it sends for the same reasons (-32022 its protocol version
// refused, -32029 its rate, -32600 a request out of bounds), or act on them (-32042
// opens a URL elicitation, which the upstream's data, not passed on, would have named;
// -32601 tells the client this server lacks the method, which Toolwarden serves, and on
// 2026-07-28 it becomes HTTP 404; -32700, -32020, -32021 are about the client's
// message, which the upstream never saw).
func upstreamCode(code int64) int64 {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, mcp.CodeHeaderMismatch,
		mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion, codeRateLimited, mcp.CodeURLElicitationRequired:
		return jsonrpc.CodeInternalError
	}
	return code
}

// lastClause drops the "mcpclient: method:" prefixes of the manager's errors.
func lastClause(err error) string {
	s := err.Error()
	for {
		rest, ok := strings.CutPrefix(s, "mcpclient: ")
		if !ok {
			return s
		}
		_, s, _ = strings.Cut(rest, ": ")
	}
}

// succeeded records a read or get that the server answered; only a recorded answer is
// passed on (docs/security.md: nothing leaves without its audit row).
func (g *Gateway) succeeded(ctx context.Context, u *use) error {
	if err := g.record(ctx, u, audit.ResultSuccess); err != nil {
		g.log.Error("gateway: record", "action", u.action, "server", u.server.Name, "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "the answer was not passed on because its audit record could not be written; try again shortly"}
	}
	return nil
}

// record appends u's audit row with result, even when the client has gone away.
func (g *Gateway) record(ctx context.Context, u *use, result string) error {
	if g.pass.journal == nil {
		return errors.New("gateway: no journal to write audit rows to")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWait)
	defer cancel()
	return audit.AppendAlone(ctx, g.pass.journal, audit.Entry{Actor: u.c.actor(), Action: u.action, TargetType: "server",
		TargetID: u.server.ID, TargetName: u.server.Name, Payload: u.payload, Result: result})
}

// clip bounds text a caller or an upstream chose before it goes into the append-only
// log: valid UTF-8, at most n bytes.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
