package template

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// URL is a request URL with placeholders. Its scheme, host and port are literal and
// checked when the template is read; placeholders may stand only in the path (each
// value escaped as one path segment's text) or in the query (escaped as a query value
// or name). A URL has no fragment: browsers keep it, servers never see it.
type URL struct {
	Raw    Text
	Scheme string // "http" or "https"
	Host   string // host[:port], as url.URL.Host has it
	parts  []urlPart
}

// urlPart is a piece of a URL after its origin (scheme://host:port).
type urlPart struct {
	lit   string
	param string
	query bool // in the query (after the first literal '?'), else in the path
	line  int
}

// url checks t as a request URL and splits it into the origin and the parts after it.
func (r *reader) url(t Text) URL {
	u := URL{Raw: t}
	if len(t.Parts) == 0 {
		r.fail(t.Line, "url is empty: write the full URL, such as https://api.example.com/items/{id}")
		return u
	}
	if t.Parts[0].Param != "" {
		r.fail(t.Line, "url must start with http:// or https:// and a host, not with placeholder {%s}: a call must never choose where the request goes", t.Parts[0].Param)
		return u
	}
	first := t.Parts[0].Lit
	scheme, rest, ok := strings.Cut(first, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		r.fail(t.Line, "url must start with http:// or https://")
		return u
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		if len(t.Parts) > 1 {
			r.fail(t.Parts[1].Line, "placeholder {%s} is in the host or port of the url: a call must never choose where the request goes; put placeholders in the path or the query", t.Parts[1].Param)
			return u
		}
		end = len(rest)
	}
	authority := rest[:end]
	if strings.Contains(authority, "@") {
		r.fail(t.Line, "url must not contain credentials (user:password@); send them in a header")
		return u
	}
	origin, err := url.Parse(scheme + "://" + authority)
	if err != nil || origin.Host == "" || origin.Path != "" {
		r.fail(t.Line, "url has no valid host: %q", authority)
		return u
	}
	if p := origin.Port(); p != "" && strings.Trim(p, "0123456789") != "" {
		r.fail(t.Line, "url port %q is not a number", p)
		return u
	}
	u.Scheme, u.Host = scheme, origin.Host
	// The rest, in order: literals (split at the first '?') and placeholders.
	query := false
	addLit := func(s string, line int) bool {
		if i := strings.IndexByte(s, '#'); i >= 0 {
			r.fail(line, "url must not have a #fragment: servers never see it")
			return false
		}
		if !query {
			if i := strings.IndexByte(s, '?'); i >= 0 {
				if i > 0 {
					u.parts = append(u.parts, urlPart{lit: s[:i]})
				}
				query = true
				u.parts = append(u.parts, urlPart{lit: s[i:], query: true})
				return true
			}
		}
		if s != "" {
			u.parts = append(u.parts, urlPart{lit: s, query: query})
		}
		return true
	}
	if !addLit(rest[end:], t.Line) {
		return u
	}
	for _, p := range t.Parts[1:] {
		if p.Param != "" {
			u.parts = append(u.parts, urlPart{param: p.Param, query: query, line: p.Line})
			continue
		}
		if !addLit(p.Lit, t.Line) {
			return u
		}
	}
	// The literal skeleton, placeholders standing in as "x", must be a URL of this origin.
	var b strings.Builder
	b.WriteString(scheme + "://" + u.Host)
	for _, p := range u.parts {
		if p.param != "" {
			b.WriteString("x")
		} else {
			b.WriteString(p.lit)
		}
	}
	if parsed, err := url.Parse(b.String()); err != nil || parsed.Host != u.Host {
		r.fail(t.Line, "url is not a valid URL")
	}
	return u
}

// shown is the URL for error messages: the template's path with its placeholders as
// {name}, without the query. Arguments (a secret parameter among them, escaped past
// what the masker recognises) never appear in it.
func (u URL) shown() string {
	var b strings.Builder
	b.WriteString(u.Scheme + "://" + u.Host)
	for _, p := range u.parts {
		if p.query {
			break
		}
		if p.param != "" {
			b.WriteString("{" + p.param + "}")
			continue
		}
		lit, _, inQuery := strings.Cut(p.lit, "?")
		b.WriteString(lit)
		if inQuery {
			break
		}
	}
	return b.String()
}

// expand builds the URL of a call. Path values are escaped as path text ('/', '?',
// '#' and '%' included), must pass pathValue each and, joined with the text around
// them, as their whole segment, and may not make a whole segment "." or ".." (a
// server would climb out of the path the template names) or empty; query
// values are escaped as query text. The result is parsed again and must still have
// the template's origin.
func (u URL) expand(a args) (string, error) {
	var b strings.Builder
	b.WriteString(u.Scheme + "://" + u.Host)
	seg, segParam, segFirst := strings.Builder{}, "", ""
	endSegment := func() error {
		s := seg.String()
		if segFirst != "" {
			// Each value passes alone, but two may still make a dot segment together
			// ("%2" and "e." are sent as "%252e." and decode to ".."): the segment as
			// a server decodes it is checked whole.
			if err := pathValue(segFirst, percentDecode(s), true); err != nil {
				var rf *refusal
				if errors.As(err, &rf) {
					rf.where = " (with the rest of its URL path segment)"
				}
				return err
			}
		}
		if segParam != "" && (s == "." || s == "..") {
			return refuse(segParam, "would make the URL path segment %q, which climbs out of the path the template names", s)
		}
		if segParam != "" && s == "" {
			// /users//profile: servers merge or redirect it to /users/profile, and
			// DELETE /items/{id} with no id would be DELETE /items/, the collection.
			return refuse(segParam, "is empty, and would leave an empty URL path segment, which a server may read as another path")
		}
		seg.Reset()
		segParam, segFirst = "", ""
		return nil
	}
	for _, p := range u.parts {
		if p.param == "" {
			if !p.query {
				for i, piece := range strings.Split(p.lit, "/") {
					if i > 0 {
						if err := endSegment(); err != nil {
							return "", err
						}
					}
					seg.WriteString(piece)
				}
			} else if err := endSegment(); err != nil {
				return "", err
			}
			b.WriteString(p.lit)
			continue
		}
		v := a.text(p.param)
		if p.query {
			b.WriteString(url.QueryEscape(v))
			continue
		}
		if err := pathValue(p.param, v, false); err != nil {
			return "", err
		}
		esc := url.PathEscape(v)
		seg.WriteString(esc)
		segParam = p.param
		if segFirst == "" {
			segFirst = p.param
		}
		b.WriteString(esc)
	}
	if err := endSegment(); err != nil {
		return "", err
	}
	out := b.String()
	parsed, err := url.Parse(out)
	if err != nil {
		return "", refuse(u.firstParam(), "does not make a valid URL: %v", err)
	}
	if !strings.EqualFold(parsed.Scheme, u.Scheme) || parsed.Host != u.Host || parsed.User != nil {
		return "", refuse(u.firstParam(), "would change where the request goes")
	}
	return out, nil
}

func (u URL) firstParam() string {
	for _, p := range u.parts {
		if p.param != "" {
			return p.param
		}
	}
	return ""
}

// maxPathDecodes is how many percent-decodings of a path value pathValue looks
// through: a proxy and the server behind it may each decode once, and no real value
// needs more layers than this.
const maxPathDecodes = 3

// pathValue refuses a path placeholder's value that could leave the path the template
// names once a proxy or server decodes %2F (and %5C) back to '/' (and '\') and resolves
// dot segments, as nginx's proxy_pass with a path and many frameworks do: escaping alone
// would send "../../admin" as "..%2F..%2Fadmin" and the backend would see "/admin".
// Split at '/' and '\', in the value as it is and after each percent-decoding, no piece
// may be "." or "..", also once what follows a ';' in it is dropped, as Tomcat, Jetty and
// Spring drop a segment's path parameters ("..;x" is ".." to them), and no piece may be
// empty when there is more than one (a leading, trailing or doubled slash would join
// the value's edge to the text around it, or merge segments). whole says v is a whole
// URL path segment (decoded once), whose pieces may not be empty once their parameters
// are dropped either. Values such as "v1.2", "a.b..c", "group/project" or "50%" pass.
func pathValue(param, v string, whole bool) error {
	for decodes := 0; ; decodes++ {
		if err := pathPieces(param, v, decodes, whole); err != nil {
			return err
		}
		next := percentDecode(v)
		if next == v {
			return nil
		}
		if decodes == maxPathDecodes {
			return refuse(param, "is percent-encoded more than %d times over, which a URL path value never needs: a server decoding it again could read it as another path", maxPathDecodes)
		}
		v = next
	}
}

func pathPieces(param, v string, decodes int, whole bool) error {
	pieces := strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' })
	if strings.IndexAny(v, "/\\") < 0 {
		pieces = []string{v}
	} else if len(pieces) != strings.Count(v, "/")+strings.Count(v, "\\")+1 {
		return refuse(param, "has an empty piece between slashes (a leading, trailing or doubled '/' or '\\')%s: a proxy or server that decodes %%2F would see another path than the template names", decodedNote(decodes))
	}
	for i, piece := range pieces {
		name, _, params := strings.Cut(piece, ";")
		switch {
		case name == "." || name == "..":
			how := ""
			if params {
				how = fmt.Sprintf(" (%q to servers such as Tomcat, Jetty and Spring, which drop what follows ';' in a segment)", name)
			}
			if len(pieces) == 1 {
				return refuse(param, "is %q%s%s, a URL path segment that climbs out of the path the template names", piece, decodedNote(decodes), how)
			}
			return refuse(param, "has the piece %q between slashes%s%s: a proxy or server that decodes %%2F, or reads '\\' as '/', would see a path that climbs out of the path the template names", piece, decodedNote(decodes), how)
		case name == "" && params && (whole || 0 < i && i < len(pieces)-1):
			return refuse(param, "would make the URL path segment %q%s, which servers such as Tomcat, Jetty and Spring read as empty (they drop what follows ';' in a segment), and so as another path than the template names", piece, decodedNote(decodes))
		}
	}
	return nil
}

func decodedNote(decodes int) string {
	switch decodes {
	case 0:
		return ""
	case 1:
		return " once percent-decoded"
	}
	return fmt.Sprintf(" after %d percent-decodings", decodes)
}

// percentDecode decodes each valid %XX of s and leaves anything else as it is, as a
// lenient server would: url.PathUnescape gives up on the whole value at a stray '%'.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
