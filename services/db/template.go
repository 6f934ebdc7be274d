package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/toolwarden/toolwarden/migrations"
)

// A cluster template is a cleanly stopped embedded cluster with every migration applied,
// made once (by `make build`, through `toolwarden pg-template`) so that a first start
// copies it instead of running initdb and the migrations: most of a fresh start's time
// (docs/architecture.md, Performance (Start-up)). A template is used only when its stamp says it was
// made the way this build makes clusters, by the same PostgreSQL installation and major
// version, and holds exactly this build's schema; anything else falls back to initdb.

// templateStamp describes a template: it sits beside the template's data folder.
type templateStamp struct {
	BinDir    string `json:"bin_dir"`    // the PostgreSQL installation that made it
	PGVersion string `json:"pg_version"` // its PG_VERSION (the major version)
	Recipe    string `json:"recipe"`     // clusterRecipe when it was made
	Schema    string `json:"schema"`     // SchemaDigest when it was made
	Made      string `json:"made"`
}

const (
	templateStampFile = "stamp.json"
	// templateFormat changes when what a template holds changes other than through
	// initdb's arguments, the roles or the migrations.
	templateFormat = 1
	// copyPrefix names the folders a first start copies a template into, beside the
	// data folder; workPrefix those MakeTemplate builds one in, beside the template.
	copyPrefix = "data.copy-"
	workPrefix = ".pg-template-"
	// staleAfter is when such a folder is a crashed process's leftover: copying or
	// making a template takes seconds.
	staleAfter = time.Hour
)

// clusterRecipe says how this build makes a cluster, beside the migrations.
func clusterRecipe() string {
	return fmt.Sprintf("format %d; initdb %s; application role %s", templateFormat, strings.Join(initdbArgs, " "), AppRole)
}

// SchemaDigest identifies the schema this build migrates to: Toolwarden's migrations
// and River's, by content (computed once: they are compiled in).
var SchemaDigest = sync.OnceValue(func() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	if m, err := rivermigrate.New(riverpgxv5.New(nil), nil); err == nil {
		for _, v := range m.AllVersions() {
			fmt.Fprintf(h, "river %d %d\n%s", v.Version, len(v.SQLUp), v.SQLUp)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
})

// install is a PostgreSQL installation: its bin folder and major version ("15").
type install struct{ binDir, major string }

// findInstall is the installation FindBinDir picks, with its major version.
func findInstall() (install, error) {
	binDir, err := FindBinDir()
	if err != nil {
		return install{}, err
	}
	major, err := binMajor(binDir)
	return install{binDir, major}, err
}

// DefaultTemplateDir is where serve looks for a template by default: pg-template beside
// the executable (bin/pg-template after `make build`).
func DefaultTemplateDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(exe), "pg-template")
}

// TemplateCurrent reports whether dir holds a template this build and this machine's
// PostgreSQL can use, and if not, why.
func TemplateCurrent(dir string) (bool, string) {
	in, err := findInstall()
	if err != nil {
		return false, err.Error()
	}
	root, why := openTemplate(dir, in)
	if root == nil {
		return false, why
	}
	root.Close()
	return true, ""
}

// openTemplate opens the template in dir when it fits in and this build, else says
// why not. Everything of the template is read through the returned root: a template
// remade meanwhile (renamed aside, then removed) makes the reading fail instead of
// mixing two templates' files.
func openTemplate(dir string, in install) (*os.Root, string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "no template: " + err.Error()
	}
	why := templateFits(root, in)
	if why != "" {
		root.Close()
		return nil, why
	}
	return root, ""
}

func templateFits(root *os.Root, in install) string {
	// Whoever can write the template decides the configuration of every cluster made
	// from it (postgresql.conf can load libraries and run commands): it must be ours or
	// root's, and writable by nobody else.
	for _, name := range []string{".", templateStampFile} {
		st, err := root.Lstat(name)
		if err != nil {
			return "the template has no stamp: " + err.Error()
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if ok && (sys.Uid != uint32(os.Geteuid()) && sys.Uid != 0 || st.Mode().Perm()&0o022 != 0) {
			return fmt.Sprintf("%s of the template belongs to uid %d with mode %v: a template must belong to this user or root and be writable by no one else",
				name, sys.Uid, st.Mode().Perm())
		}
	}
	raw, err := root.ReadFile(templateStampFile)
	if err != nil {
		return "the template has no stamp: " + err.Error()
	}
	var st templateStamp
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Sprintf("the template's stamp: %v", err)
	}
	if st.BinDir != in.binDir {
		return fmt.Sprintf("the template was made by the PostgreSQL in %s, this start uses %s", st.BinDir, in.binDir)
	}
	if st.PGVersion != in.major {
		return fmt.Sprintf("the template is for PostgreSQL %s, %s is PostgreSQL %s", st.PGVersion, in.binDir, in.major)
	}
	if st.Recipe != clusterRecipe() {
		return fmt.Sprintf("the template's cluster was made otherwise (%s) than this build makes one (%s)", st.Recipe, clusterRecipe())
	}
	if st.Schema != SchemaDigest() {
		return "the template holds another build's schema (make build makes a new one)"
	}
	if _, err := root.Stat(filepath.Join("data", "PG_VERSION")); err != nil {
		return "the template has no cluster: " + err.Error()
	}
	return ""
}

// binMajor is the major version of the postgres in binDir ("15" for 15.10), as its
// data folders write it in PG_VERSION.
func binMajor(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "-V").Output()
	if err != nil {
		return "", fmt.Errorf("db: %s -V: %w", filepath.Join(binDir, "postgres"), err)
	}
	// "postgres (PostgreSQL) 15.10 (Debian 15.10-1)"
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return "", fmt.Errorf("db: postgres -V said %q", out)
	}
	major, _, _ := strings.Cut(fields[2], ".")
	if _, err := strconv.Atoi(major); err != nil {
		return "", fmt.Errorf("db: postgres -V said %q", out)
	}
	return major, nil
}

// MakeTemplate makes the cluster template in dir, unless one this build can use is
// there already (made reports whether it made one). It builds beside dir and renames,
// so a start never sees half a template; it replaces only a template (or an empty
// folder), never another folder that happens to be named.
func MakeTemplate(ctx context.Context, dir string, log *slog.Logger) (made bool, err error) {
	in, err := findInstall()
	if err != nil {
		return false, err
	}
	if root, _ := openTemplate(dir, in); root != nil {
		root.Close()
		return false, nil
	}
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	if err := replaceable(abs); err != nil {
		return false, err
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	removeStale(filepath.Join(parent, workPrefix+"*"))
	work, err := os.MkdirTemp(parent, workPrefix)
	if err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	defer os.RemoveAll(work)
	// Searchable by the user PostgreSQL runs as when we are root (StartCluster would
	// otherwise widen it with a warning); only the finished template is closed again.
	if err := os.Chmod(work, 0o711); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	c, err := StartCluster(ctx, work, &ClusterOptions{Logger: log})
	if err != nil {
		return false, err
	}
	err = Migrate(c.URL())
	c.Stop()
	if err != nil {
		return false, err
	}
	// Copies start without recovery only from a cluster that was shut down cleanly.
	if _, err := os.Stat(filepath.Join(c.DataDir(), "postmaster.pid")); err == nil {
		return false, fmt.Errorf("db: template: postgres did not shut down cleanly (see %s)", filepath.Join(c.Dir, "postgres.log"))
	}
	// The cluster's data folder is the template; the socket folder and log are not.
	if err := os.Rename(c.DataDir(), filepath.Join(work, "data")); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	_ = os.Remove(filepath.Join(work, "data", "postmaster.opts"))
	if err := os.RemoveAll(filepath.Join(work, "pg")); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	stamp, _ := json.MarshalIndent(templateStamp{BinDir: in.binDir, PGVersion: in.major, Recipe: clusterRecipe(),
		Schema: SchemaDigest(), Made: time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	if err := os.WriteFile(filepath.Join(work, templateStampFile), append(stamp, '\n'), 0o644); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	if err := os.Chmod(work, 0o700); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	// The old template goes aside first, so dir always names a whole template or none;
	// a start reading the old one meanwhile fails its copy and runs initdb.
	old := ""
	if _, err := os.Lstat(abs); err == nil {
		old = work + ".old"
		if err := os.Rename(abs, old); err != nil {
			return false, fmt.Errorf("db: template: move the old one aside: %w", err)
		}
	}
	if err := os.Rename(work, abs); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	return true, nil
}

// replaceable refuses to let MakeTemplate replace dir unless it is missing, an empty
// folder or a template (a stamp and a data folder): --out names a folder that is
// removed, and a mistyped one must not cost a data dir.
func replaceable(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("db: template: %w", err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	if len(entries) == 0 || len(entries) == 2 && names[templateStampFile] && names["data"] {
		return nil
	}
	return fmt.Errorf("db: template: %s holds something other than a cluster template; name an empty or missing folder", dir)
}

// removeStale removes the folders matching pattern that no one has changed for
// staleAfter: what a process killed while copying or making a template left.
func removeStale(pattern string) {
	paths, _ := filepath.Glob(pattern)
	for _, p := range paths {
		if st, err := os.Lstat(p); err == nil && st.IsDir() && time.Since(st.ModTime()) > staleAfter {
			_ = os.RemoveAll(p)
		}
	}
}

// copiedTemplate makes the cluster from the template when there is one that fits, and
// says whether it did; the caller runs initdb when not. The error is for a copy that
// is in place but could not be made durable: initdb cannot run over it.
func (c *Cluster) copiedTemplate(cred *syscall.Credential) (bool, error) {
	dir := c.opts.Template
	if dir == "" {
		return false, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// No template at all: the usual case for an installed binary.
		c.log.Debug("database: no cluster template; running initdb", "template", dir)
		return false, nil
	}
	major, err := binMajor(c.binDir)
	if err != nil {
		c.log.Warn("database: not using the cluster template; running initdb", "template", dir, "err", err)
		return false, nil
	}
	root, why := openTemplate(dir, install{c.binDir, major})
	if root == nil {
		c.log.Info("database: not using the cluster template; running initdb", "template", dir, "why", why)
		return false, nil
	}
	defer root.Close()
	start := time.Now()
	tmp, err := c.copyTemplate(root, cred)
	if err == nil {
		err = os.Rename(tmp, c.DataDir())
	}
	if err != nil {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
		c.log.Warn("database: copying the cluster template failed; running initdb", "template", dir, "err", err)
		return false, nil
	}
	if !c.opts.Fast {
		if err := syncPath(c.Dir); err != nil {
			return false, fmt.Errorf("db: the cluster copied from the template is in place but not durable: %w", err)
		}
	}
	c.log.Info("database: created embedded PostgreSQL cluster from the template", "dir", c.DataDir(), "template", dir,
		"took", time.Since(start).Round(time.Millisecond))
	return true, nil
}

// copyTemplate copies the template's data folder to a new folder beside the cluster's
// data folder, owned by cred when not nil, and unless the cluster is Fast, durable when
// it returns (as initdb makes its files: a crash right after a first start must not
// leave a cluster with half its files). It returns the folder, also on an error after
// making it. A cluster is about 1,500 small files, and creating a file is most of the
// cost, so several are created at once (4 at a time: 210 ms where one at a time took
// 370 on the 2-core development machine).
func (c *Cluster) copyTemplate(root *os.Root, cred *syscall.Credential) (string, error) {
	src, err := root.OpenRoot("data")
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := os.MkdirTemp(c.Dir, copyPrefix)
	if err != nil {
		return "", err
	}
	type file struct {
		name string
		perm fs.FileMode
	}
	var files []file
	var dirs []string
	err = fs.WalkDir(src.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, name)
		switch {
		case d.IsDir():
			if name == "." {
				err = os.Chmod(to, info.Mode().Perm())
			} else {
				err = os.Mkdir(to, info.Mode().Perm())
			}
			if err == nil {
				dirs = append(dirs, to)
				err = chownTo(to, cred)
			}
			return err
		case d.Type().IsRegular():
			files = append(files, file{name, info.Mode().Perm()})
			return nil
		}
		return fmt.Errorf("%s: not a file or folder", name)
	})
	if err != nil {
		return dst, err
	}
	var g errgroup.Group
	g.SetLimit(4)
	for _, f := range files {
		g.Go(func() error { return copyFile(src, f.name, filepath.Join(dst, f.name), f.perm, cred) })
	}
	if err := g.Wait(); err != nil || c.opts.Fast {
		return dst, err
	}
	// One syncfs makes the whole copy durable (40 ms on the development machine, against
	// 400 ms for an fsync of each file and folder); where it fails, fsync each.
	if err := syncFS(dst); err == nil {
		return dst, nil
	}
	for _, f := range files {
		g.Go(func() error { return syncPath(filepath.Join(dst, f.name)) })
	}
	if err := g.Wait(); err != nil {
		return dst, err
	}
	for _, d := range slices.Backward(dirs) {
		if err := syncPath(d); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// syncFS writes out everything waiting for the file system that holds p (syncfs(2)):
// with a folder just copied, that is mostly the copy.
func syncFS(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

func chownTo(p string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return os.Lchown(p, int(cred.Uid), int(cred.Gid))
}

// copyFile copies the file name of src to the new file dst.
func copyFile(src *os.Root, name, dst string, perm fs.FileMode, cred *syscall.Credential) error {
	in, err := src.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	// *os.File to *os.File: copy_file_range, no copy through user space.
	_, err = io.Copy(out, in)
	if err == nil && cred != nil {
		err = out.Chown(int(cred.Uid), int(cred.Gid))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) { // a file system without fsync for this
		return nil
	}
	return err
}
