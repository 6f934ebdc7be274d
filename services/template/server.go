package template

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options says how a template server runs its tools; zero fields take the defaults.
type Options struct {
	// Name and Version are what the server says about itself when a session starts.
	Name, Version string
	// Env is the whole environment of every command (NAME=value); nil: empty.
	Env []string
	// Prepare is called on every command after it is built and before it starts
	// (services/mcpclient confines it there, as it does stdio servers).
	Prepare func(*exec.Cmd)
	// MaxTimeout caps every tool's timeout. Default and upper bound MaxTimeout.
	MaxTimeout time.Duration
	// MaxOutput caps a command's standard output and an HTTP response body, in bytes.
	// Default DefaultMaxOutput.
	MaxOutput int
	// MaxConcurrent is how many calls run at once; more wait. Default
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// Transport sends the HTTP tools' requests; nil: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxTimeout <= 0 || o.MaxTimeout > MaxTimeout {
		o.MaxTimeout = MaxTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.Name == "" {
		o.Name = "template"
	}
	if o.Version == "" {
		o.Version = "template"
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// NewServer returns an MCP server that offers t's tools and runs them as opts say.
// Connect it to a client over mcp.NewInMemoryTransports.
func NewServer(t *Template, opts Options) *mcp.Server {
	o := opts.withDefaults()
	rn := &runner{opts: o, parsers: t.Parsers,
		client: &http.Client{Transport: o.Transport, CheckRedirect: sameOrigin}}
	srv := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version},
		&mcp.ServerOptions{Logger: o.Logger, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	slots := make(chan struct{}, o.MaxConcurrent)
	for _, tool := range t.Tools {
		var p *Parser
		if tool.Parse != "" {
			p = t.Parsers[tool.Parse]
		}
		srv.AddTool(mcpTool(tool, p), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			values := map[string]any{}
			if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.UseNumber()
				if err := dec.Decode(&values); err != nil {
					return textResult(errorResult("the arguments must be a JSON object: %v", err)), nil
				}
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			defer func() { <-slots }()
			return textResult(rn.call(ctx, tool, values)), nil
		})
	}
	return srv
}

// mcpTool is t as listed, what it does (with its parser p, nil for none) under
// SpecMeta: calls never read it.
func mcpTool(t *Tool, p *Parser) *mcp.Tool {
	out := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
		Meta: mcp.Meta{SpecMeta: specHash(t, p)}}
	if t.Annotations != nil {
		a := &mcp.ToolAnnotations{}
		for k, v := range t.Annotations {
			b, _ := v.(bool)
			switch k {
			case "title":
				a.Title, _ = v.(string)
			case "readOnlyHint":
				a.ReadOnlyHint = b
			case "destructiveHint":
				a.DestructiveHint = &b
			case "idempotentHint":
				a.IdempotentHint = b
			case "openWorldHint":
				a.OpenWorldHint = &b
			}
		}
		out.Annotations = a
	}
	return out
}

func textResult(r Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
}

// Call runs the tool named name of t with opts, outside any MCP session: tests and
// previews use it. ok is false when t has no such tool.
func Call(ctx context.Context, t *Template, opts Options, name string, values map[string]any) (res Result, ok bool) {
	o := opts.withDefaults()
	rn := &runner{opts: o, parsers: t.Parsers, client: &http.Client{Transport: o.Transport, CheckRedirect: sameOrigin}}
	for _, tool := range t.Tools {
		if tool.Name == name {
			return rn.call(ctx, tool, values), true
		}
	}
	return Result{}, false
}
