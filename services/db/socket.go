package db

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgservicefile"
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

// credentialKeys are the connection settings naming files that hold what a client
// connects with: the password file, and the client certificate and its key.
var credentialKeys = []string{"passfile", "sslcert", "sslkey"}

// CredentialFiles returns the files a client could connect to the database at url
// with, for stdio servers to be kept away from them as from its socket: a server
// running as Toolwarden's user could otherwise connect with the client key or a
// password in the passfile. They are the passfile, sslcert and sslkey that url, the
// service it uses (whose service file is included) or the environment (PGPASSFILE,
// PGSSLCERT, PGSSLKEY, PGSERVICE, PGSERVICEFILE) name, and pgconn's defaults under the
// home directory (~/.pgpass, ~/.postgresql/postgresql.crt and .key) where they exist.
// Only the service file is read, so a missing certificate is not an error here.
func CredentialFiles(url string) ([]string, error) {
	conn, err := connSettings(url)
	if err != nil {
		return nil, fmt.Errorf("db: parse the database URL: %w", err)
	}
	env := map[string]string{}
	for k, v := range map[string]string{"PGPASSFILE": "passfile", "PGSSLCERT": "sslcert", "PGSSLKEY": "sslkey",
		"PGSERVICE": "service", "PGSERVICEFILE": "servicefile"} {
		env[v] = os.Getenv(k)
	}
	home, _ := os.UserHomeDir()
	pick := func(k, def string) string {
		if conn[k] != "" {
			return conn[k]
		}
		if env[k] != "" {
			return env[k]
		}
		return def
	}
	var out []string
	layers := []map[string]string{conn, env}
	if service := pick("service", ""); service != "" {
		// pgconn reads the service file only when a service is named; its settings
		// may name the files, or hold the password themselves.
		def := ""
		if home != "" {
			def = filepath.Join(home, ".pg_service.conf")
		}
		if file := pick("servicefile", def); file != "" {
			out = append(out, file)
			if sf, err := pgservicefile.ReadServicefile(file); err == nil {
				if s, err := sf.GetService(service); err == nil {
					layers = append(layers, s.Settings)
				}
			}
		}
	}
	for _, l := range layers {
		for _, k := range credentialKeys {
			if l[k] != "" {
				out = append(out, l[k])
			}
		}
	}
	if home != "" {
		for _, f := range []string{".pgpass", ".postgresql/postgresql.crt", ".postgresql/postgresql.key"} {
			if p := filepath.Join(home, f); exists(p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// connSettings is the parameters of a connection string, URL or keyword/value, parsed
// as pgconn does but without reading the files they name (pgconn.ParseConfig loads
// the client certificate, and fails when it is missing).
func connSettings(s string) (map[string]string, error) {
	out := map[string]string{}
	rest, isURL := strings.CutPrefix(s, "postgresql://")
	if !isURL {
		rest, isURL = strings.CutPrefix(s, "postgres://")
	}
	if isURL {
		// Only the query holds these parameters. A user name or password may hold a
		// '?': the user information ends at the last '@' before the path.
		if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
			rest = rest[i+1:]
		}
		_, query, _ := strings.Cut(rest, "?")
		for query != "" {
			var pair string
			pair, query, _ = strings.Cut(query, "&")
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("query parameter %q has no value", k)
			}
			key, err := uriDecode(k)
			if err != nil {
				return nil, err
			}
			if out[key], err = uriDecode(v); err != nil {
				return nil, fmt.Errorf("query parameter %q: %w", key, err)
			}
		}
		return out, nil
	}
	const space = " \t\n\r\v\f"
	s = strings.TrimLeft(s, space)
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		key = strings.Trim(key, space)
		if !ok || key == "" || strings.ContainsAny(key, space) {
			return nil, fmt.Errorf("%q is not a keyword=value pair", strings.Fields(s)[0])
		}
		s = strings.TrimLeft(rest, space)
		var val strings.Builder
		quoted := strings.HasPrefix(s, "'")
		if quoted {
			s = s[1:]
		}
		i := 0
		for ; i < len(s); i++ {
			c := s[i]
			if quoted && c == '\'' || !quoted && strings.IndexByte(space, c) >= 0 {
				break
			}
			if c == '\\' {
				if i++; i == len(s) {
					break
				}
				c = s[i]
			}
			val.WriteByte(c)
		}
		if quoted {
			if i >= len(s) {
				return nil, fmt.Errorf("the value of %s has no closing quote", key)
			}
			i++
		}
		out[key] = val.String()
		s = strings.TrimLeft(s[min(i, len(s)):], space)
	}
	return out, nil
}

// uriDecode decodes a URL query component as libpq does: %XX escapes, '+' kept.
func uriDecode(raw string) (string, error) {
	raw = strings.Trim(raw, " ")
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] != '%' {
			b.WriteByte(raw[i])
			continue
		}
		if i+2 >= len(raw) {
			return "", fmt.Errorf("%q: an incomplete %%-escape", raw)
		}
		c, err := strconv.ParseUint(raw[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%q: %q is not a %%-escape", raw, raw[i:i+3])
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}
