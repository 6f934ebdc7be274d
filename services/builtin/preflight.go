package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Preflight says why a call of tool (its bare name) with args, made as m says, would be
// refused whatever a person decided: the conversation is another person's, or a path
// argument is one the path guard refuses (outside the root, a workspace the caller
// cannot reach, outside the workspace with no grant yet). The router asks it before anyone
// is asked to approve a call, so nobody approves a call that cannot run. It changes
// nothing: no conversation is claimed, no workspace made, no grant used; the call
// checks again when it runs. nil when nothing refuses the call now; a *verr.Error
// naming each argument at fault, or a forbidden fault for the conversation.
func (s *Server) Preflight(ctx context.Context, tool string, m callmeta.Meta, args json.RawMessage) error {
	s.mu.Lock()
	t := s.tools[tool]
	s.mu.Unlock()
	if t == nil {
		return nil
	}
	if s.opts.Conversations != nil && m.UserID != "" {
		owner, claimed, err := s.opts.Conversations.OwnerOf(ctx, m.ConversationID)
		if err != nil {
			return err
		}
		if msg := notYours(m, owner); claimed && msg != "" {
			// A field the caller can change, as the call's own refusal says (an error
			// result over /mcp, not a protocol error).
			return fault.Forbidden("conversation_id: " + msg).WithDetails(
				[]verr.Field{{Field: "/conversation_id", Message: msg, Kind: verr.KindNotAllowed}})
		}
	}
	if tool != "file_operations" {
		return nil
	}
	var a struct {
		Operation  string `json:"operation"`
		FilePath   string `json:"filePath"`
		NewPath    string `json:"newPath"`
		Path       string `json:"path"`
		SnapshotID string `json:"snapshotId"`
	}
	if json.Unmarshal(args, &a) != nil {
		return nil // the call itself says what is wrong with its arguments
	}
	p := preflight{ctx: ctx, s: s, c: Call{Meta: m, Workspace: s.workspaceDir(m.ConversationID), peek: true}, op: a.Operation}
	switch a.Operation {
	case "read_file", "get_file_info":
		p.read("filePath", a.FilePath)
	case "list_dir", "file_search", "grep_search":
		if a.Path != "" && a.Path != "." {
			p.read("path", a.Path)
		}
	case "copy_file":
		p.read("filePath", a.FilePath)
		p.write("newPath", a.NewPath)
	case "rename_file":
		// Across workspaces it cannot run whatever grants there are: said first, as the
		// call says it, rather than asking for grants it would not use.
		if s.renameAcross(p.c, a.FilePath, a.NewPath) {
			p.fields.AddKind("/newPath", verr.KindValue, errRenameAcross.Error())
			break
		}
		p.write("filePath", a.FilePath)
		p.write("newPath", a.NewPath)
	case "create_file", "replace_string", "multi_replace", "insert_edit", "delete_file", "create_directory":
		p.write("filePath", a.FilePath)
	case "restore_snapshot":
		// What the restore writes outside the workspace, as the restore checks it; a
		// snapshot it cannot read is the call's to report.
		for _, t := range s.restoreTargetsOf(p.c, a.SnapshotID) {
			p.checkTarget("snapshotId", t.abs, t, true)
		}
	}
	if p.err != nil && len(p.fields.Fields) == 0 {
		return p.err // the router lets the call go on: the tool checks again
	}
	return p.fields.Err()
}

// preflight collects what the path guard says of a call's path arguments.
type preflight struct {
	ctx    context.Context
	s      *Server
	c      Call
	op     string
	fields verr.Error
	err    error // not a refusal: the guard could not tell (the database)
	// asking are the areas whose grant the call is told to ask for already: one grant
	// is asked for at a time, the first path's (a grant with no target, as the
	// question suggests, covers a rename's or copy's two paths).
	asking map[string]bool
}

func (p *preflight) read(param, path string) { p.check(param, path, false) }

func (p *preflight) write(param, path string) { p.check(param, path, true) }

func (p *preflight) check(param, path string, write bool) {
	if path == "" {
		return // a missing argument is the schema's to report
	}
	t, err := p.s.resolve(p.c, param, path)
	if err != nil {
		p.refuse(param, err)
		return
	}
	p.checkTarget(param, path, t, write)
}

// checkTarget checks t, which param names as path.
func (p *preflight) checkTarget(param, path string, t target, write bool) {
	var err error
	switch {
	case t.area == "":
		if p.op != "list_dir" { // only a listing may name the root
			p.refuse(param, guardf("%s: %s is the built-in root, which holds workspaces, not files", param, path))
		}
		return
	case write && t.rel == ".":
		p.refuse(param, guardf("%s: %s is a workspace itself, not a file in it", param, path))
		return
	case p.asking[t.area]:
		return
	}
	// Who owns the workspace is checked first, so that another person's is refused
	// as the guard refuses it whether or not its directory exists (errUnreachable).
	if write {
		err = p.s.mayWrite(p.ctx, p.c, p.op, t)
	} else {
		_, err = p.s.mayRead(p.ctx, p.c, p.op, t)
	}
	var ae *errAuthorization
	if err != nil && !errors.As(err, &ae) {
		p.refuse(param, err)
		return
	}
	if err == nil && !t.own {
		// Another workspace must exist: a call that may reach it would still end in
		// "not a workspace". (One that needs a grant was checked before asking.)
		ar, err := p.s.openArea(t.area)
		if err != nil {
			p.refuse(param, err)
			return
		}
		ar.Close()
	}
	// A path the grants allow now leaves the next to be checked on its own: a grant
	// for one file does not let the call write another (the call's write.lookAhead).
	if ae != nil {
		if p.asking == nil {
			p.asking = map[string]bool{}
		}
		p.asking[t.area] = true
	}
	if err != nil {
		p.refuse(param, err)
	}
}

// refuse records the guard's refusal of param, or keeps an error that is not one.
func (p *preflight) refuse(param string, err error) {
	var g *errGuard
	var a *errAuthorization
	if !errors.As(err, &g) && !errors.As(err, &a) {
		p.err = err
		return
	}
	f := verr.Field{Field: "/" + param, Kind: verr.KindNotAllowed, Message: strings.TrimPrefix(err.Error(), param+": ")}
	if a != nil {
		f.AuthorizationKey, f.Target = a.key, a.path
	}
	p.fields.Fields = append(p.fields.Fields, f)
}
