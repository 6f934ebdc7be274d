package db

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// SocketPaths returns what a local process could use to reach the database at url over
// a unix socket, for stdio servers to be kept away from it: each socket's directory, or
// the socket file itself when that directory is shared by everyone (/tmp, PostgreSQL's
// own default), where hiding the directory would take it from every server. None for a
// database reached over TCP only.
func SocketPaths(url string) ([]string, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: parse the database URL: %w", err)
	}
	var out []string
	add := func(host string, port uint16) {
		if !strings.HasPrefix(host, "/") {
			return
		}
		dir := filepath.Clean(host)
		if st, err := os.Stat(dir); err == nil && st.Mode()&fs.ModeSticky != 0 && st.Mode().Perm()&0o002 != 0 {
			out = append(out, filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(int(port))))
			return
		}
		out = append(out, dir)
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out, nil
}
