package builtin

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// restore_snapshot puts a directory back as it was: a real directory where a symlink
// was put in its place (not left the symlink, reported restored), with its mode exactly
// (not widened to rwx for its owner, and set again on one that exists), setgid and
// setuid bits included.
func TestRestoreDirectoriesAndModesExactly(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	at := func(p string) string { return filepath.Join(ws, p) }
	mkdir := func(p string, mode fs.FileMode) {
		t.Helper()
		if err := os.Mkdir(at(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(at(p), mode); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(args string) string {
		t.Helper()
		_, sc := runFileOp(t, s, ws, args)
		id, _ := sc["snapshotId"].(string)
		if id == "" {
			t.Fatalf("%s: no snapshotId in %v", args, sc)
		}
		return id
	}
	restore := func(id string) string {
		t.Helper()
		text, _ := runFileOp(t, s, ws, `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`)
		return text
	}
	modeOf := func(p string) fs.FileMode {
		t.Helper()
		fi, err := os.Lstat(at(p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}

	// A deleted directory, a symlink to another directory of the workspace put in its place.
	mkdir("d", 0o755)
	mkdir("other", 0o755)
	id := snap(`{"operation":"delete_file","filePath":"d"}`)
	if err := os.Symlink("other", at("d")); err != nil {
		t.Fatal(err)
	}
	text := restore(id)
	if m := modeOf("d"); !m.IsDir() {
		t.Errorf("d after restoring its deletion (%s): %v, want a directory", text, m)
	}
	if m := modeOf("other"); !m.IsDir() {
		t.Errorf("other after d was restored: %v", m)
	}

	// A directory's mode exactly, made again, and set again where it exists.
	mkdir("ro", 0o550)
	id = snap(`{"operation":"delete_file","filePath":"ro"}`)
	restore(id)
	if m := modeOf("ro"); m != fs.ModeDir|0o550 {
		t.Errorf("ro (0550) restored as %v", m)
	}
	mkdir("e", 0o755)
	id = snap(`{"operation":"delete_file","filePath":"e"}`)
	mkdir("e", 0o700)
	restore(id)
	if m := modeOf("e"); m != fs.ModeDir|0o755 {
		t.Errorf("e (0755), made again 0700, restored as %v", m)
	}
	mkdir("g", fs.ModeSetgid|fs.ModeSticky|0o750)
	id = snap(`{"operation":"delete_file","filePath":"g"}`)
	restore(id)
	if m := modeOf("g"); m != fs.ModeDir|fs.ModeSetgid|fs.ModeSticky|0o750 {
		t.Errorf("g (setgid, sticky, 0750) restored as %v", m)
	}

	// A setuid file an edit left without its bit (an edit keeps the permissions).
	if err := os.WriteFile(at("tool"), []byte("#!/bin/sh\necho one\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(at("tool"), fs.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	id = snap(`{"operation":"replace_string","filePath":"tool","oldString":"one","newString":"two"}`)
	restore(id)
	if m := modeOf("tool"); m != fs.ModeSetuid|0o755 {
		t.Errorf("tool (setuid, 0755) restored as %v", m)
	}
}
