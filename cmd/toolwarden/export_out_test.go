package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// export --out writes through a symbolic link (the link stays, its target holds the
// export) and into a pipe (read as it is written), not a regular file put in their
// place: renamed over, the link became a 0600 file and its target was never written.
func TestExportOutLinkAndPipe(t *testing.T) {
	t.Parallel()
	dir := dbtest.TempDir(t)
	common := []string{"export", "--database-url", dbtest.NewURL(t), "--data-dir", dir}
	want, stderr, err := runCmd(t, "", common...)
	if err != nil || !strings.Contains(want, "version: 1\n") {
		t.Fatalf("export to stdout: %v\n%s%s", err, want, stderr)
	}

	files := t.TempDir()
	target, link := filepath.Join(files, "config.yaml"), filepath.Join(files, "link.yaml")
	if err := os.WriteFile(target, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("config.yaml", link); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCmd(t, "", append(common, "--out", link)...); err != nil {
		t.Fatalf("export --out a link: %v\n%s", err, stderr)
	}
	if got, err := os.Readlink(link); err != nil || got != "config.yaml" {
		t.Fatalf("the link after export: %q %v, want it a link to config.yaml still", got, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != want {
		t.Fatalf("the link's target: %v\n%s\nwant the export", err, b)
	}

	fifo := filepath.Join(files, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	read := make(chan string, 1)
	go func() {
		// Opening blocks until export opens the pipe for writing; EOF comes when it closes it.
		f, err := os.Open(fifo)
		if err != nil {
			read <- "open: " + err.Error()
			return
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			read <- "read: " + err.Error()
			return
		}
		read <- string(b)
	}()
	if _, stderr, err := runCmd(t, "", append(common, "--out", fifo)...); err != nil {
		// Unblock the reader, which would otherwise wait for a writer for ever.
		if w, oerr := os.OpenFile(fifo, os.O_WRONLY, 0); oerr == nil {
			w.Close()
		}
		t.Fatalf("export --out a pipe: %v\n%s", err, stderr)
	}
	if got := <-read; got != want {
		t.Fatalf("read from the pipe:\n%s\nwant the export:\n%s", got, want)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Fatalf("the pipe after export: %v %v, want it a pipe still", fi, err)
	}
}
