// Package toolname is the one place that builds and parses tool names: the qualified
// name "server__tool" the API, plans and the MCP endpoint use, and its dotted form
// "server__tool.operation" (or "tool.operation"), which names a tool plus its operation
// argument (seed 001).
package toolname

import (
	"slices"
	"strings"
)

// Sep joins a server's name and a tool's name.
const Sep = "__"

// Join is the qualified name of tool on server.
func Join(server, tool string) string { return server + Sep + tool }

// Split cuts a qualified name at its first separator. Server names are slugs without
// "_", so the first "__" is the separator even when the tool's own name contains "__".
// ok is false when name has no separator (a bare tool name); either part may be empty.
func Split(name string) (server, tool string, ok bool) {
	return strings.Cut(name, Sep)
}

// Qualified reports whether name has a server part.
func Qualified(name string) bool { return strings.Contains(name, Sep) }

// Bare is name without its server part (name itself when it has none).
func Bare(name string) string {
	if _, tool, ok := Split(name); ok {
		return tool
	}
	return name
}

// CutOperation reads name as the dotted form: the part before the first dot after any
// server prefix is the tool (qualified again when name was), the rest the operation.
// ok is false when name has no dot there or either side of it is empty. Callers try
// the whole name first, since a tool's own name may contain dots.
func CutOperation(name string) (tool, operation string, ok bool) {
	server, rest, qualified := Split(name)
	if !qualified {
		rest = name
	}
	base, op, dotted := strings.Cut(rest, ".")
	if !dotted || base == "" || op == "" {
		return "", "", false
	}
	if qualified {
		base = Join(server, base)
	}
	return base, op, true
}

// reserved are the server names Toolwarden keeps for its own tools (the MCP gateway's
// toolwarden__await_execution, …): no registered server may take one, or its tools'
// qualified names would collide with Toolwarden's.
var reserved = [...]string{"toolwarden", Builtin}

// Builtin is the built-in server's name (registry.BuiltinName).
const Builtin = "builtin"

// Reserved reports whether server is a name kept for Toolwarden's own tools.
func Reserved(server string) bool { return slices.Contains(reserved[:], server) }

// ReservedNames are the names Reserved reports, in a fresh slice.
func ReservedNames() []string { return append([]string(nil), reserved[:]...) }
