// Package template reads, checks and runs template tools: MCP tools an administrator
// defines in YAML (seed 002's tools.yaml) as a command to run or an HTTP request to
// send, with {param} placeholders filled from the call's arguments and an optional
// parser for the response. A server of type template is served in-process by
// [NewServer], so discovery, calls, pinning and the test panel treat it as any other
// MCP server (docs/templates.md).
//
// Every placeholder is escaped for where it lands: argv elements go to exec as they
// are (never through a shell of ours) and may not turn into options, nor be code that a
// shell or interpreter the template names runs (interp.go); URL parts are escaped for
// the path or the query and can never change the scheme, host or port; JSON bodies get
// JSON values; header values cannot carry line breaks. Commands run in their own
// process group, with a timeout, and the whole group is killed when they end.
package template

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/theory/jsonpath"
)

// Limits of a template.
const (
	// MaxBytes is the largest template accepted.
	MaxBytes = 256 << 10
	// MaxNodes bounds the YAML values a template stands for, its aliases followed.
	MaxNodes = 200_000
	// MaxTools is the most tools one template may define.
	MaxTools = 500
	// DefaultTimeout bounds a tool that does not set its own timeout.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the longest timeout a tool may set; Options.MaxTimeout may lower it.
	MaxTimeout = 10 * time.Minute
	// DefaultMaxOutput caps what a tool returns (a command's standard output, an HTTP
	// response body); more is cut off, and the result says so.
	DefaultMaxOutput = 1 << 20
	// DefaultMaxConcurrent is how many calls of one template server run at once;
	// more wait their turn.
	DefaultMaxConcurrent = 8
)

// Template is a parsed and checked template: its tools in the order written and its
// named response parsers.
type Template struct {
	Tools   []*Tool
	Parsers map[string]*Parser
}

// Tool is one tool of a template: exactly one of Command and HTTP is set.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is the tool's input schema as JSON values (a mapping with type
	// object); its properties are the placeholders the tool may use.
	InputSchema map[string]any
	// Annotations are the MCP annotations as written (readOnlyHint and the like); nil
	// when none. They decide risk as any server's do (services/risk).
	Annotations map[string]any
	Command     *Command
	HTTP        *HTTP
	// Parse names the response parser, "" for none.
	Parse string
	Line  int

	defaults map[string]any // each property's default, from InputSchema
}

// Command runs a program with arguments, through no shell but one its argv names,
// whose code then has no placeholders.
type Command struct {
	// Argv is the program and its arguments; Argv[0] has no placeholders.
	Argv []Text
	// Stdin is written to the program's standard input; nil: none (empty input).
	Stdin   *Text
	Timeout time.Duration
}

// HTTP sends one request.
type HTTP struct {
	Method string
	URL    URL
	// Headers are sent in the order written; names are literal.
	Headers []Header
	// Exactly one of JSON, Body and Form is set, or none (no body).
	JSON    *jsonValue // a JSON body: placeholders give JSON values
	Body    *Text      // a text body, placeholders as they are
	Form    []FormField
	Timeout time.Duration
}

// Header is one request header.
type Header struct {
	Name  string
	Value Text
}

// FormField is one field of a form body (application/x-www-form-urlencoded).
type FormField struct {
	Name  string
	Value Text
}

// Parser types.
const (
	ParserRegex = "regex"
	ParserJSON  = "json"
	ParserTable = "table"
)

// Parser turns a tool's raw output into its result.
type Parser struct {
	Name string
	Type string // ParserRegex, ParserJSON or ParserTable
	Line int

	// regex: the group of the first match (Group 0 is the whole match), or of every
	// match as a JSON array (All).
	Pattern *regexp.Regexp
	Group   int
	All     bool

	// json: the values an RFC 9535 JSONPath query selects.
	Path *jsonpath.Path

	// table: one column of a text table (cells split by Separator, or by "|" when a
	// row has one, else by white space) as a JSON array of strings.
	FromColumn int
	Unique     bool
	Header     bool // the first row names the columns and is skipped
	Separator  string
}

// Problem is one thing wrong with a template, at a line of it (0 when it is about the
// whole text).
type Problem struct {
	Line    int
	Message string
}

func (p Problem) String() string {
	if p.Line <= 0 {
		return p.Message
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Message)
}

// Error is every problem found in a template.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "template: " + strings.Join(parts, "; ")
}

// HasCommands reports whether the template text defines a tool that runs a command
// (running programs on the Toolwarden host is for administrators). Text that does not
// parse defines nothing, and is refused wherever it would be stored or run.
func HasCommands(text string) bool {
	t, err := Parse(text)
	if err != nil {
		return false
	}
	for _, tool := range t.Tools {
		if tool.Command != nil {
			return true
		}
	}
	return false
}

// ToolNames lists the template's tool names in the order written; nil when the text
// does not parse.
func ToolNames(text string) []string {
	t, err := Parse(text)
	if err != nil {
		return nil
	}
	out := make([]string, len(t.Tools))
	for i, tool := range t.Tools {
		out[i] = tool.Name
	}
	return out
}
