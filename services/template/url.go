package template

import (
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
// '#' and '%' included), and a value may not make a whole segment "." or ".." (a
// server would climb out of the path the template names) or empty; query values are escaped as
// query text. The result is parsed again and must still have the template's origin.
func (u URL) expand(a args) (string, error) {
	var b strings.Builder
	b.WriteString(u.Scheme + "://" + u.Host)
	seg, segParam := strings.Builder{}, ""
	endSegment := func() error {
		s := seg.String()
		if segParam != "" && (s == "." || s == "..") {
			return refuse(segParam, "would make the URL path segment %q, which climbs out of the path the template names", s)
		}
		if segParam != "" && s == "" {
			// /users//profile: servers merge or redirect it to /users/profile, and
			// DELETE /items/{id} with no id would be DELETE /items/, the collection.
			return refuse(segParam, "is empty, and would leave an empty URL path segment, which a server may read as another path")
		}
		seg.Reset()
		segParam = ""
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
		esc := url.PathEscape(v)
		seg.WriteString(esc)
		segParam = p.param
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
