package confine

import "golang.org/x/sys/unix"

// NewFailing returns a Confiner whose namespaces the kernel refuses to create
// (clone rejects CLONE_FS together with CLONE_NEWNS), as on a machine without them.
func NewFailing(spec Spec) *Confiner {
	c := New(spec)
	c.extraClone = unix.CLONE_FS
	return c
}

// NewUserMode returns a Confiner that uses a user namespace even as root: the mode a
// root Toolwarden falls back to where it may not create namespaces directly.
func NewUserMode(spec Spec) *Confiner {
	c := New(spec)
	c.modes = []mode{modeUser}
	return c
}

// SetRuntimeDirs replaces the user's runtime directories c hides (runtimeDirs reads
// them from the environment, which a parallel test may not change); before c's first
// use.
func SetRuntimeDirs(c *Confiner, dirs ...string) { c.runtime = dirs }

// RuntimeDirs are the user's runtime directories c hides.
func RuntimeDirs(c *Confiner) []string { return c.runtime }
