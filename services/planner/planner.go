// Package planner turns a prompt into a plan: tool calls to run in order and, optionally,
// calls that undo them. It proposes only; Toolwarden decides a plan's risk (docs/architecture.md, The path of a tool call), so
// neither planner returns anything but steps.
//
// Two planners exist. [Rules], the default, needs no network and understands explicit tool
// calls written in plain text, and sentences that name a tool by its words (words.go). [LLM] asks an OpenAI-compatible chat-completions endpoint
// (Ollama, llama.cpp, vLLM, OpenAI) with the tools as function definitions, and is used when
// --llm-url is set.
//
// # The rules grammar
//
// A prompt is one or more calls, optionally followed by a rollback clause:
//
//	prompt   = calls [ ("rollback" | "undo") ":" calls ]
//	calls    = call { separator call }
//	separator= "then" | "and then" | ", then" | ";" | newline    (any run of them;
//	           "and" also joins when "call" or "run" follows)
//	call     = [ "call" | "run" ] name ( json-object | { key "=" value [","] } )
//	value    = json | "double quoted" | 'single quoted' | bare
//
// Keywords are case-insensitive. Examples, with tools fs__write_file and fs__read_file:
//
//	call fs__write_file path=/tmp/x content="hi"
//	call write_file path=/tmp/x content='it\'s' then read_file path=/tmp/x
//	fs__write_file {"path":"/tmp/x","content":"hi"}; fs__read_file path=/tmp/x
//	call fs__write_file path=/tmp/x content="a\nb"
//	    and then call fs__read_file path=/tmp/x limit=10
//	call fs__write_file path=/tmp/x content=hi rollback: call fs__delete_file path=/tmp/x
//
// Names. A name is a qualified tool name ("server__tool"); a bare tool name that exactly one
// of the given tools has ("write_file"); or either of those followed by ".operation"
// ("file_operations.read_file"), which names the tool with the argument operation set to
// "read_file" unless the arguments set it themselves (seed 001). A name no tool has is
// reported with the closest tool names; a bare name several servers have, with all of them.
// The word "call" or "run" before a name is optional; "run cmd=ls" calls a tool named run
// when one of the tools has that name.
//
// Arguments. Either one JSON object right after the name, or key=value pairs (spaces around
// "=" and a comma after a value are allowed). A value is:
//   - JSON when it starts with "{" or "[" (unless the tool's schema says the key is only a
//     string: then it is a bare word, so pattern=[a-z]+ works);
//   - a string when double- or single-quoted; backslash escapes \n \t \r \b \f \/ \\ \" \'
//     and \uXXXX are understood, any other backslash is kept as written (C:\dir);
//   - otherwise a bare word, up to whitespace, ";" or a comma followed by whitespace, typed
//     by the tool's input schema: integer and number keys take a JSON number, boolean keys
//     true or false, array and object keys only JSON, null where the schema allows null;
//     string keys and keys the schema does not list take the word as a string.
//
// Keys the schema does not list are kept and required keys are not checked: the router
// validates every call and reports every problem at once. Arguments are emitted as compact
// JSON objects in the order written, so a prompt always gives the same bytes.
//
// A newline ends a call unless the next line continues it with key=value. "then" must be
// followed by a call. Anything that is not a call is reported as a [NotUnderstood] naming
// the text at fault, its byte offset and an example of the accepted form.
package planner

import (
	"context"
	"encoding/json"

	"github.com/toolwarden/toolwarden/services/fault"
)

// Tool is a tool a planner may use: an enabled tool the requester may call.
type Tool struct {
	Name        string          // qualified name, "server__tool"
	Description string          // what the tool does, as its server says
	InputSchema json.RawMessage // JSON Schema object
}

// Step is one tool call of a plan.
type Step struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object, never null
}

// Plan is what a planner proposes: steps to run in order and, optionally, steps that undo them.
type Plan struct {
	Steps    []Step `json:"steps"`
	Rollback []Step `json:"rollback,omitempty"`
}

// Planner turns a prompt into a plan over the given tools.
type Planner interface {
	Plan(ctx context.Context, prompt string, tools []Tool) (Plan, error)
	Name() string // "rules" or "llm:<model>" for the record
}

// CodeNotUnderstood is the code of the fault a planner returns for a prompt it cannot
// turn into a plan; its details are a NotUnderstood.
const CodeNotUnderstood = "not_understood"

// NotUnderstood is what a planner could not understand: Message says what and how to
// write it (shown to the user as is). Fragment is the part of the prompt at fault,
// Offset its byte offset (-1 when not about one place). Fragment and Offset are the
// fault's details in the API.
type NotUnderstood struct {
	Message  string `json:"-"`
	Fragment string `json:"fragment"`
	Offset   int    `json:"offset"`
}

// err is nu as the error a planner returns.
func (nu NotUnderstood) err() error {
	return fault.Unprocessable(CodeNotUnderstood, nu.Message).About("prompt").WithDetails(nu)
}

// NotUnderstoodIn returns what a planner could not understand, when err says so.
func NotUnderstoodIn(err error) (NotUnderstood, bool) {
	f, ok := fault.As(err)
	if !ok || f.Code != CodeNotUnderstood {
		return NotUnderstood{}, false
	}
	nu, ok := f.Details.(NotUnderstood)
	return nu, ok
}

// example is the accepted form, shown when a prompt is not understood.
const example = `call fs__write_file path=/tmp/x content="hi" then call fs__read_file path=/tmp/x`

var (
	_ Planner = (*Rules)(nil)
	_ Planner = (*LLM)(nil)
)
