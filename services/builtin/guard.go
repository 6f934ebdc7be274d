package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The path guard of file_operations. Every file a built-in operation touches is reached
// through an os.Root opened on one directory directly under the built-in root (an
// "area": a conversation's workspace), so neither "..", an absolute path, nor a symlink
// (also one swapped in between a check and the use) can lead outside that directory:
// the kernel-level walk of os.Root refuses it. Paths are never compared as strings to
// decide what may be reached; the lexical step below only decides which area a path
// names, and whether that area is the caller's own workspace.
//
// Reads and writes inside the caller's workspace are allowed. Another workspace is
// reached by who owns its conversation (Conversations): reads in the caller's own
// other conversations are allowed (seed 001: "file reads anywhere", bounded here by
// the person); writes there, and reads or writes in a workspace no conversation
// claimed, need a grant (user_collaboration with authorize_operation); another
// person's workspace is refused always, since a grant is the caller's own say-so.
// A removed person's workspace is refused as another person's. Every workspace the
// caller can neither use nor open with a grant (another person's, a removed person's,
// one that does not exist) gets one answer, errUnreachable, so that the answers do not
// tell which conversation ids other people use. Paths outside the root
// are refused always. The snapshot store (snapshotDir), any other top-level name that
// is not a workspace's (.terminals, names cased differently) and files lying directly
// in the root are never reachable.

const (
	// maxPathLen bounds a path argument.
	maxPathLen = 4096
	// snapshotDir is the snapshot store's directory under the root.
	snapshotDir = ".snapshots"
)

// target is a path argument resolved: the area (a directory directly under the root,
// "" for the root itself) and the path inside it.
type target struct {
	area string
	rel  string // inside area, native separators; "." for the area itself
	// own: area is the caller's workspace.
	own bool
	// shown is the path as the agent should read it: relative to its workspace when
	// inside it, absolute otherwise.
	shown string
	abs   string
	// anyGrant: a grant with no target let this call read it (openRead), in a
	// workspace no conversation claimed. A copy then writes its new path on the same
	// grant, as a rename does on one such grant for its two paths (write.target).
	anyGrant bool
}

// errGuard is a refusal of the path guard.
type errGuard struct{ msg string }

func (e *errGuard) Error() string { return e.msg }

func guardf(format string, a ...any) error { return &errGuard{fmt.Sprintf(format, a...)} }

// resolve places path p (relative: in the caller's workspace; absolute: must be under
// the root) in an area.
func (s *Server) resolve(c Call, param, p string) (target, error) {
	switch {
	case p == "":
		return target{}, guardf("%s: empty", param)
	case len(p) > maxPathLen:
		return target{}, guardf("%s: the path is %d bytes long, more than %d", param, len(p), maxPathLen)
	case strings.ContainsRune(p, 0):
		return target{}, guardf("%s: the path contains a NUL byte", param)
	}
	ws := filepath.Base(c.Workspace)
	var rel string
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(s.opts.Root, filepath.Clean(p))
		if err != nil {
			return target{}, s.outside(param, p, c)
		}
		rel = r
	} else {
		rel = filepath.Join(ws, p)
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return target{}, s.outside(param, p, c)
	}
	t := target{abs: filepath.Join(s.opts.Root, rel)}
	if rel == "." {
		t.rel, t.shown = ".", t.abs
		return t, nil
	}
	t.area, t.rel, _ = strings.Cut(rel, string(filepath.Separator))
	if t.rel == "" {
		t.rel = "."
	}
	if strings.EqualFold(t.area, snapshotDir) {
		return target{}, guardf("%s: %s is Toolwarden's snapshot store, which file_operations cannot reach", param, p)
	}
	if !workspaceName.MatchString(t.area) {
		// Not a name Workspace gives (.terminals, or a workspace's cased differently,
		// which a case-insensitive root would open).
		return target{}, guardf("%s: %s is not in a workspace: workspaces are the lowercase directories under %s", param, p, s.opts.Root)
	}
	t.own = t.area == ws
	t.shown = t.abs
	if t.own {
		t.shown = t.rel
	}
	return t, nil
}

func (s *Server) outside(param, p string, c Call) error {
	return guardf("%s: %s is outside the built-in root %s; files live in this conversation's workspace %s (relative paths resolve there)",
		param, p, s.opts.Root, c.Workspace)
}

// openArea opens area as a root of its own. The area must be a real directory (not a
// symlink), and the directory opened must be the one checked.
func (s *Server) openArea(area string) (*os.Root, error) {
	if !workspaceName.MatchString(area) {
		return nil, guardf("%s is not a workspace", area)
	}
	rr, err := os.OpenRoot(s.opts.Root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	fi, err := rr.Lstat(area)
	if errors.Is(err, os.ErrNotExist) {
		return nil, s.errUnreachable(area)
	} else if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, s.errUnreachable(area)
	}
	ar, err := rr.OpenRoot(area)
	if err != nil {
		return nil, err
	}
	st, err := ar.Stat(".")
	if err != nil || !os.SameFile(fi, st) {
		ar.Close()
		return nil, guardf("%s changed while it was being opened", filepath.Join(s.opts.Root, area))
	}
	return ar, nil
}

// access is how an area relates to the caller.
type access int

const (
	accessOwn       access = iota // the call's workspace
	accessMine                    // a workspace of another of the caller's conversations
	accessUnclaimed               // a workspace no conversation claimed
	accessOthers                  // another person's workspace, or a removed person's
)

// accessOf is how t's area relates to c's caller. Without conversation owners (or for
// a call made by no person) every other workspace is the caller's.
func (s *Server) accessOf(ctx context.Context, c Call, t target) (access, error) {
	if t.own {
		return accessOwn, nil
	}
	if s.opts.Conversations == nil || c.UserID == "" || t.area == "" {
		return accessMine, nil
	}
	owner, known, err := s.opts.Conversations.OwnerOfDir(ctx, t.area)
	switch {
	case err != nil:
		return 0, fmt.Errorf("looking up the workspace's owner: %w", err)
	case !known:
		return accessUnclaimed, nil
	case owner == "":
		// A removed person's: nobody may use it again (migration 32), and as
		// unclaimed a grant would open it.
		return accessOthers, nil
	case owner == c.UserID:
		return accessMine, nil
	}
	return accessOthers, nil
}

// errUnreachable refuses a path in area, a workspace the caller can neither use nor
// open with a grant: another person's, a removed person's, or one that does not exist.
// It is one answer for all of them, naming the area the caller named and each thing it
// may be, so that a caller cannot probe which conversation ids other people use.
func (s *Server) errUnreachable(area string) error {
	return guardf("%s is not a workspace this conversation can reach: it is another person's workspace, a removed person's, or no workspace at all; "+
		"files live in this conversation's workspace, or in one under %s that a grant opens", filepath.Join(s.opts.Root, area), s.opts.Root)
}

// isArea reports whether area is a workspace that exists (openArea opens it).
func (s *Server) isArea(area string) (bool, error) {
	ar, err := s.openArea(area)
	var g *errGuard
	if errors.As(err, &g) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	ar.Close()
	return true, nil
}

// grantedArea is granted for t in a workspace that exists; one that does not is
// refused as another person's is (errUnreachable), before any grant is looked at or
// used, so that asking for a grant tells nothing either.
func (s *Server) grantedArea(ctx context.Context, c Call, op string, t target) (anyGrant bool, err error) {
	if ok, err := s.isArea(t.area); err != nil {
		return false, err
	} else if !ok {
		return false, s.errUnreachable(t.area)
	}
	return s.granted(ctx, c, op, t)
}

// mayRead refuses a read (operation op) of t in another person's workspace, or in one
// no conversation claimed unless a grant allows it; anyGrant says a grant with no
// target did (granted).
func (s *Server) mayRead(ctx context.Context, c Call, op string, t target) (anyGrant bool, err error) {
	switch a, err := s.accessOf(ctx, c, t); {
	case err != nil:
		return false, err
	case a == accessOwn || a == accessMine:
		return false, nil
	case a == accessOthers:
		return false, s.errUnreachable(t.area)
	}
	return s.grantedArea(ctx, c, op, t)
}

// mayWrite refuses a write (operation op) to t outside the caller's workspace unless a
// grant allows it, and always in another person's.
func (s *Server) mayWrite(ctx context.Context, c Call, op string, t target) error {
	_, err := s.mayWriteAny(ctx, c, op, t)
	return err
}

// mayWriteAny is mayWrite that also says whether it used a grant with no target.
func (s *Server) mayWriteAny(ctx context.Context, c Call, op string, t target) (anyGrant bool, err error) {
	switch a, err := s.accessOf(ctx, c, t); {
	case err != nil:
		return false, err
	case a == accessOwn:
		return false, nil
	case a == accessOthers:
		return false, s.errUnreachable(t.area)
	}
	return s.grantedArea(ctx, c, op, t)
}

// needsGrant reports whether c may write t (or read it: read) only on a grant. Another
// person's workspace is not one: no grant allows it; nor is one that does not exist,
// which is refused as another person's is.
func (s *Server) needsGrant(ctx context.Context, c Call, t target, read bool) (bool, error) {
	a, err := s.accessOf(ctx, c, t)
	if err != nil || !(a == accessUnclaimed || a == accessMine && !read) {
		return false, err
	}
	return s.isArea(t.area)
}

// hasGrant reports whether a grant would allow operation op on t now, without using it.
func (s *Server) hasGrant(ctx context.Context, c Call, op string, t target) (bool, error) {
	if t.area == "" || s.opts.Grants == nil {
		return false, nil
	}
	ok, err := s.opts.Grants.Has(ctx, c.ConversationID, "file_operations."+op, t.abs)
	if err != nil {
		return false, fmt.Errorf("checking the grants: %w", err)
	}
	return ok, nil
}

// granted uses a grant for operation op on t, or says what to ask for; anyGrant says
// the grant had no target, so it allows a write's second path too (write.target).
func (s *Server) granted(ctx context.Context, c Call, op string, t target) (anyGrant bool, err error) {
	key := "file_operations." + op
	if t.area != "" && s.opts.Grants != nil {
		ok := false
		if c.peek {
			ok, err = s.opts.Grants.Has(ctx, c.ConversationID, key, t.abs)
		} else {
			ok, anyGrant, err = s.opts.Grants.Use(ctx, c.ConversationID, key, t.abs)
		}
		if err != nil {
			return false, fmt.Errorf("checking the grants: %w", err)
		}
		if ok {
			return anyGrant, nil
		}
	}
	return false, &errAuthorization{key: key, path: t.abs, workspace: c.Workspace}
}

// errAuthorization is a write outside the workspace without a grant (seed 000 §2, §4).
// It names the form a grant's target takes: the absolute path, which is what a grant is
// matched against (user_collaboration resolves a relative one in the workspace).
type errAuthorization struct{ key, path, workspace string }

func (e *errAuthorization) Error() string {
	return fmt.Sprintf("authorization required: %s is outside this conversation's workspace (%s). Ask the person first: "+
		`call user_collaboration with {"prompt": "May I %s %s?", "authorize_operation": %q}, and retry after they approve. `+
		`To ask for this file only, add "target": %q (the file's absolute path as written here, or its path relative to this conversation's workspace).`,
		e.path, e.workspace, strings.TrimPrefix(e.key, "file_operations."), e.path, e.key, e.path)
}
