// Package static embeds the CSS, JavaScript and vendored libraries, and names each
// file by a content hash so browsers can cache it forever.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"strings"
)

// FS holds the static files.
//
//go:embed css js img vendor
var FS embed.FS

// hashes maps a file's path to the first 12 hex digits of its SHA-256. It is derived
// from the embedded files once, at start-up.
var hashes = func() map[string]string {
	m := map[string]string{}
	_ = fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := FS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[p] = hex.EncodeToString(sum[:6])
		return nil
	})
	return m
}()

// Prefix is where the files are served.
const Prefix = "/static/"

// URL returns the cache-busting URL of a static file ("css/app.css" →
// "/static/css/app.css?v=<hash>"). Unknown files get no version.
func URL(path string) string {
	path = strings.TrimPrefix(path, "/")
	if h, ok := hashes[path]; ok {
		return Prefix + path + "?v=" + h
	}
	return Prefix + path
}
