package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// tools answers tools/list and tools/call for the request's caller; every other method
// is the SDK's.
func (g *Gateway) tools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			c := callerOf(req)
			lr, ok := req.(*mcp.ListToolsRequest)
			if c == nil || !ok {
				return nil, errNoCaller
			}
			cursor := ""
			if lr.Params != nil {
				cursor = lr.Params.Cursor
			}
			if err := g.throttle(c); err != nil {
				return nil, err
			}
			return g.list(ctx, c, cursor)
		case "tools/call":
			c := callerOf(req)
			cr, ok := req.(*mcp.CallToolRequest)
			if c == nil || !ok {
				return nil, errNoCaller
			}
			if isOwn(cr.Params.Name) {
				if err := g.throttle(c); err != nil {
					return errorResult(strings.ToUpper(err.Message[:1]) + err.Message[1:] + "."), nil
				}
				return next(ctx, method, req) // the SDK's table holds them (changed.go)
			}
			// Without keys this server hands out no requestState and cannot check one,
			// so such a call is held like any other (Options.Keys).
			if cr.Params.RequestState != "" && g.exec != nil && g.opts.Keys != nil {
				return g.retried(ctx, c, cr)
			}
			res, err := g.call(ctx, c, cr)
			if err == nil && res.InputRequests != nil {
				return g.relay(ctx, method, cr, next, res)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// errNoCaller cannot happen behind the bearer check; it keeps a request without a
// caller from ever reaching the router.
var errNoCaller = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no authenticated caller"}

// list is a page of the caller's tools by qualified name, as their pinned definitions
// say, then the gateway's own. The cursor is the last name
// of the page before, so a page stays right when tools come and go between pages.
func (g *Gateway) list(ctx context.Context, c *caller, cursor string) (*mcp.ListToolsResult, error) {
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: use the nextCursor of the previous page, or none for the first page"}
		}
		after = string(b)
	}
	items, err := g.router.Usable(ctx, c.actor(), c.p.User.Role)
	if err != nil {
		g.log.Error("gateway: list tools", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tool list could not be read; it was logged"}
	}
	upstream := make([]*mcp.Tool, 0, len(items))
	for _, t := range items {
		// A server named toolwarden before the name was reserved cannot shadow the
		// gateway's own tools; its tools stay reachable through the JSON API.
		if !isOwn(t.QualifiedName()) {
			upstream = append(upstream, toolOf(t))
		}
	}
	slices.SortFunc(upstream, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	all := append(upstream, ownTools...)
	start := 0
	if after != "" {
		// The page starts after the cursor's name, found by order rather than by
		// equality, so a tool removed since the last page does not restart the list.
		if k := slices.IndexFunc(ownTools, func(t *mcp.Tool) bool { return t.Name == after }); k >= 0 {
			start = len(upstream) + k + 1
		} else {
			start, _ = slices.BinarySearchFunc(upstream, after, func(t *mcp.Tool, name string) int {
				if t.Name <= name {
					return -1
				}
				return 1
			})
		}
	}
	end := min(start+g.opts.PageSize, len(all))
	res := &mcp.ListToolsResult{Tools: all[start:end], Cacheable: private} // each person's own list
	if end < len(all) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(all[end-1].Name))
	}
	return res, nil
}

// toolOf is the MCP definition of a stored tool, named server__tool, without the
// parameters its configuration fixes (a value given for one is refused).
func toolOf(t tools.CallableItem) *mcp.Tool {
	out := &mcp.Tool{Name: t.QualifiedName(), Title: t.Title, Description: t.Description, InputSchema: t.CallerSchema()}
	if tools.DeclaresOutput(t.OutputSchema) {
		out.OutputSchema = json.RawMessage(t.OutputSchema)
	}
	if present(t.Annotations) {
		var a mcp.ToolAnnotations
		if json.Unmarshal(t.Annotations, &a) == nil {
			out.Annotations = &a
		}
	}
	return out
}

func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}"
}

// call runs one tools/call through the router as the caller.
func (g *Gateway) call(ctx context.Context, c *caller, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	call := router.Call{Tool: p.Name, Arguments: p.Arguments, Actor: c.actor(), Role: c.p.User.Role,
		Source: router.SourceGateway, ConversationID: conversationOf(req.Session, p.Meta), Client: clientOf(req)}
	if tok := p.GetProgressToken(); tok != nil && req.Session != nil {
		call.Progress = func(pr router.Progress) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
				Progress: pr.Progress, Total: pr.Total, Message: pr.Message})
		}
	}
	res, err := g.router.Call(ctx, call)
	// Only a caller who may ask for approval gets a held call; others (an auditor allowed
	// one tool by a rule) are told it needs approval, as the executions API would.
	if f, ok := fault.As(err); ok && f.Code == router.CodeApprovalRequired && g.exec != nil && call.Role.Can(auth.PermExecutionCreate) {
		return g.ask(ctx, c, req, call)
	}
	if err != nil {
		return g.refused(p.Name, err)
	}
	server, _, _ := toolname.Split(res.Tool)
	return resultOf(res, server), nil
}

// maxClient bounds, in bytes, the client's name and version as every call's audit and
// usage rows keep them (as router.MaxConversationID does the conversation's).
const maxClient = 200

// clientOf is the MCP client's name and version as it gave them, cut to maxClient: the
// client chooses them, of any length, and they are stored with every call.
func clientOf(req *mcp.CallToolRequest) string {
	info := req.ClientInfo()
	if info == nil {
		return ""
	}
	s := strings.TrimSpace(strings.ToValidUTF8(info.Name+" "+info.Version, "\uFFFD"))
	return textcheck.Clip(s, maxClient-len("…"), "…")
}

// refused turns a refused or failed call into what MCP expects: a name the caller
// cannot call, or may not use, is a JSON-RPC error (unknown tool, alike for both); anything the model can act on
// (arguments to fix, an approval to seek, a wait, an upstream failure) is a tool
// result with isError, so the model reads it.
func (g *Gateway) refused(name string, err error) (*mcp.CallToolResult, error) {
	f, ok := fault.As(err)
	if !ok || f.Kind == fault.KindInternal {
		g.log.Error("gateway: call", "tool", name, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call failed on Toolwarden's side; it was logged"}
	}
	switch f.Code {
	case router.CodeToolNotFound:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	case router.CodeForbidden, router.CodeToolDisabled:
		if fields, _ := f.Details.([]verr.Field); len(fields) > 0 {
			// Refused for what this call names (a conversation of another person's),
			// which the caller can change: the model reads it, as the tool's own refusal.
			return errorResult(argumentsText(f)), nil
		}
		// Answered as an unknown name: tools/list hides such a tool, and its name, its
		// server's and why would tell anyone guessing names what the list does not.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	case router.CodeInvalidArguments:
		res := errorResult(argumentsText(f))
		res.StructuredContent = notAllowedContent(f)
		return res, nil
	case router.CodeApprovalRequired:
		return errorResult(approvalText(f)), nil
	case router.CodeRateLimited:
		return errorResult(fmt.Sprintf("Rate limited: %s.", f.Message)), nil
	}
	return errorResult(fmt.Sprintf("The call failed (%s): %s.", f.Code, f.Message)), nil
}

// argumentsText names every argument at fault, one a line.
func argumentsText(f *fault.Error) string {
	fields, _ := f.Details.([]verr.Field)
	if len(fields) == 0 {
		return "Invalid arguments: " + f.Message + "."
	}
	var b strings.Builder
	head := "Invalid arguments; correct them and call again:"
	if !slices.ContainsFunc(fields, func(fl verr.Field) bool { return fl.Kind != verr.KindNotAllowed }) {
		// Well-formed, but not allowed now: each line says what to do (ask for a grant).
		head = "Not run; the call may not reach what its arguments name:"
	}
	b.WriteString(head)
	for _, fl := range fields {
		where := strings.TrimPrefix(fl.Field, "/")
		switch where {
		case "":
			where = "(arguments)"
		case "conversation_id":
			where = "_meta.conversation_id" // where an MCP client names it
		}
		fmt.Fprintf(&b, "\n- %s: %s", where, fl.Message)
	}
	return b.String()
}

// notAllowedContent is, for a call refused before approval because its paths may
// not be reached, the structured content the built-in tool gives when it refuses the
// call itself (builtin fileError): what to ask for when a grant would allow the call
// (requiresAuthorization), else the path guard's errorType. An agent reads the same
// whichever refused. nil for arguments that are wrong rather than not allowed.
func notAllowedContent(f *fault.Error) any {
	fields, _ := f.Details.([]verr.Field)
	if len(fields) == 0 || slices.ContainsFunc(fields, func(fl verr.Field) bool { return fl.Kind != verr.KindNotAllowed }) {
		return nil
	}
	// Asking for a grant helps only when a grant would allow every path refused.
	if slices.ContainsFunc(fields, func(fl verr.Field) bool { return fl.AuthorizationKey == "" }) {
		return map[string]any{"errorType": builtin.ErrorPathNotAllowed}
	}
	return builtin.AuthorizationContent(fields[0].AuthorizationKey, fields[0].Target)
}

// approvalText says that a person must approve the call and how to ask for it (the
// router's message names the risk, why, and where a plan is submitted). The approval
// inside the call, the request held until a person decides, is the next step of #19.
func approvalText(f *fault.Error) string {
	return "Approval required: this call did not run. " + f.Message +
		". Once it is submitted, a person approves it in Toolwarden's /approvals page; a call from an MCP client cannot approve itself."
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// resultOf is the router's result as MCP content (the router's Content follows MCP's
// wire names; binary data is base64 there and bytes here).
// Resource URIs in it are namespaced by the server, as resources/list names them,
// so the client can read them through the gateway (passthrough.go).
func resultOf(res *router.Result, server string) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.IsError, Content: make([]mcp.Content, 0, len(res.Content))}
	for _, c := range res.Content {
		if server != "" {
			if c.URI != "" {
				c.URI = wrapURI(server, c.URI)
			}
			if c.Resource != nil && c.Resource.URI != "" {
				r := *c.Resource
				r.URI = wrapURI(server, r.URI)
				c.Resource = &r
			}
		}
		out.Content = append(out.Content, contentOf(c))
	}
	// A result read back from an execution's step may carry a JSON null here; MCP's
	// structuredContent is an object or absent (the TypeScript SDK refuses null).
	if sc := bytes.TrimSpace(res.StructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		out.StructuredContent = res.StructuredContent
	}
	return out
}

func contentOf(c router.Content) mcp.Content {
	switch c.Type {
	case "text":
		return &mcp.TextContent{Text: c.Text}
	case "image":
		return &mcp.ImageContent{Data: unbase64(c.Data), MIMEType: c.MIMEType}
	case "audio":
		return &mcp.AudioContent{Data: unbase64(c.Data), MIMEType: c.MIMEType}
	case "resource_link":
		return &mcp.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MIMEType: c.MIMEType, Size: c.Size}
	case "resource":
		e := &mcp.EmbeddedResource{}
		if c.Resource != nil {
			e.Resource = &mcp.ResourceContents{URI: c.Resource.URI, MIMEType: c.Resource.MIMEType, Text: c.Resource.Text}
			if c.Resource.Blob != "" {
				e.Resource.Blob = unbase64(c.Resource.Blob)
			}
		}
		return e
	}
	return &mcp.TextContent{Text: c.Text}
}

func unbase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return []byte(s)
	}
	return b
}
