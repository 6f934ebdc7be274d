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
// (docs/architecture.md, Start-up). A template is used only when its stamp says it was
// made by the same PostgreSQL major version from the same installation and holds exactly
// this build's schema; anything else falls back to initdb.

// templateStamp describes a template: it sits beside the template's data folder.
type templateStamp struct {
	BinDir    string `json:"bin_dir"`    // the PostgreSQL installation that made it
	PGVersion string `json:"pg_version"` // its PG_VERSION (the major version)
	Schema    string `json:"schema"`     // SchemaDigest when it was made
	Made      string `json:"made"`
}

const templateStampFile = "stamp.json"

// SchemaDigest identifies the schema this build migrates to: Toolwarden's migrations
// and River's, by content.
func SchemaDigest() string {
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
	binDir, err := FindBinDir()
	if err != nil {
		return false, err.Error()
	}
	return templateUsable(dir, binDir)
}

func templateUsable(dir, binDir string) (bool, string) {
	raw, err := os.ReadFile(filepath.Join(dir, templateStampFile))
	if err != nil {
		return false, "no template: " + err.Error()
	}
	var st templateStamp
	if err := json.Unmarshal(raw, &st); err != nil {
		return false, fmt.Sprintf("template stamp %s: %v", filepath.Join(dir, templateStampFile), err)
	}
	if st.BinDir != binDir {
		return false, fmt.Sprintf("the template was made by the PostgreSQL in %s, this start uses %s", st.BinDir, binDir)
	}
	major, err := binMajor(binDir)
	if err != nil {
		return false, err.Error()
	}
	if st.PGVersion != major {
		return false, fmt.Sprintf("the template is for PostgreSQL %s, %s is PostgreSQL %s", st.PGVersion, binDir, major)
	}
	if st.Schema != SchemaDigest() {
		return false, "the template holds another build's schema (make build makes a new one)"
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return false, "the template has no cluster: " + err.Error()
	}
	return true, ""
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
// so a start never sees half a template.
func MakeTemplate(ctx context.Context, dir string, log *slog.Logger) (made bool, err error) {
	if ok, _ := TemplateCurrent(dir); ok {
		return false, nil
	}
	binDir, err := FindBinDir()
	if err != nil {
		return false, err
	}
	major, err := binMajor(binDir)
	if err != nil {
		return false, err
	}
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	work, err := os.MkdirTemp(filepath.Dir(abs), ".pg-template-")
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
	// The cluster's data folder is the template; the socket folder and log are not.
	if err := os.Rename(c.DataDir(), filepath.Join(work, "data")); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	_ = os.Remove(filepath.Join(work, "data", "postmaster.opts"))
	if err := os.RemoveAll(filepath.Join(work, "pg")); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	stamp, _ := json.MarshalIndent(templateStamp{BinDir: binDir, PGVersion: major, Schema: SchemaDigest(),
		Made: time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	if err := os.WriteFile(filepath.Join(work, templateStampFile), append(stamp, '\n'), 0o644); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	if err := os.Chmod(work, 0o700); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	if err := os.RemoveAll(abs); err != nil {
		return false, fmt.Errorf("db: template: remove the old one: %w", err)
	}
	if err := os.Rename(work, abs); err != nil {
		return false, fmt.Errorf("db: template: %w", err)
	}
	return true, nil
}

// fromTemplate fills the cluster's empty data folder with a copy of the template in dir,
// owned by cred (nil: by us). It copies into a folder beside the data folder and renames
// it, so a crash part way leaves no cluster that looks whole.
func (c *Cluster) fromTemplate(dir string, cred *syscall.Credential) error {
	start := time.Now()
	src := filepath.Join(dir, "data")
	tmp := c.DataDir() + ".copy"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err := c.copyTree(src, tmp, cred)
	if err == nil {
		err = os.Rename(tmp, c.DataDir())
	}
	if err == nil && !c.opts.Fast {
		err = syncPath(c.Dir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	c.log.Info("database: created embedded PostgreSQL cluster from the template", "dir", c.DataDir(), "template", dir,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// copyTree copies the folder src to dst (which must not exist), files and folders only,
// owned by cred when not nil, and unless the cluster is Fast, durable when it returns
// (as initdb makes its files: a crash right after a first start must not leave a
// cluster with half its files). A cluster is about 1,500 small files, and creating a
// file is most of the cost, so several are created at once (4 at a time: 210 ms where
// one at a time took 370 on the 2-core development machine).
func (c *Cluster) copyTree(src, dst string, cred *syscall.Credential) error {
	type file struct {
		from, to string
		perm     fs.FileMode
	}
	var files []file
	var dirs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
			dirs = append(dirs, to)
			return chownTo(to, cred)
		case d.Type().IsRegular():
			files = append(files, file{p, to, info.Mode().Perm()})
			return nil
		}
		return fmt.Errorf("%s: not a file or folder", p)
	})
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(4)
	for _, f := range files {
		g.Go(func() error { return copyFile(f.from, f.to, f.perm, cred) })
	}
	if err := g.Wait(); err != nil || c.opts.Fast {
		return err
	}
	// One syncfs makes the whole copy durable (40 ms on the development machine, against
	// 400 ms for an fsync of each file and folder); where it fails, fsync each.
	if err := syncFS(dst); err == nil {
		return nil
	}
	for _, f := range files {
		g.Go(func() error { return syncPath(f.to) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := syncPath(d); err != nil {
			return err
		}
	}
	return nil
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

// copyFile copies src to the new file dst.
func copyFile(src, dst string, perm fs.FileMode, cred *syscall.Credential) error {
	in, err := os.Open(src)
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
