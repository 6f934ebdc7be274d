package router

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// masks hide the configured secret values of one call, its server's (environment,
// headers) and its tool's (secret parameters), in everything of the call that leaves
// the router: its result, its error, its progress (issue #17, finding 10). The router
// masks once, here, so the API, the test panel, executions, events and the usage log
// all get the masked text.
type masks struct{ secrets.Maskers }

// masksOf are the masks of a call of e that ran on the session whose masker is served
// (CallToolServed): the secrets that session runs with, which a Refresh may have changed
// since. A call that found no session is masked with the server's session now.
func (r *Router) masksOf(e *entry, served *secrets.Masker) masks {
	if served == nil {
		served = r.mcp.Masker(e.t.ServerID)
	}
	return masks{secrets.Maskers{served, e.masker}}
}

func (ms masks) text(s string) string { return ms.String(s) }

// result masks res in place.
func (ms masks) result(res *Result) {
	for i := range res.Content {
		c := &res.Content[i]
		c.Text, c.URI, c.Name, c.Title, c.Description = ms.text(c.Text), ms.text(c.URI), ms.text(c.Name), ms.text(c.Title), ms.text(c.Description)
		c.MIMEType = ms.text(c.MIMEType)
		if c.Data != "" {
			// An image or audio item's bytes are a server's to choose: text in them is
			// masked as a blob's is.
			c.Data = ms.blob(c.Data)
		}
		if c.Resource != nil {
			c.Resource.URI, c.Resource.Text, c.Resource.MIMEType = ms.text(c.Resource.URI), ms.text(c.Resource.Text), ms.text(c.Resource.MIMEType)
			if c.Resource.Blob != "" {
				c.Resource.Blob = ms.blob(c.Resource.Blob)
			}
		}
	}
	res.StructuredContent = ms.JSON(res.StructuredContent)
}

// blob masks base64 bytes (an embedded resource's blob, an image's or audio's data) that
// are UTF-8 text (a configuration file sent as application/octet-stream can quote a
// secret as text does); other bytes (a real image) are left as they came, as the
// gateway's resources/read does.
func (ms masks) blob(b64 string) string {
	if ms.Empty() || notText(b64) {
		return b64
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b64
	}
	if out := secrets.MaskUTF8(raw, ms.text); !bytes.Equal(out, raw) {
		return base64.StdEncoding.EncodeToString(out)
	}
	return b64
}

// notText reports whether the first bytes of base64 b64 are already not UTF-8 (a PNG's
// or a JPEG's first byte is not), so that a large image is not decoded whole on every
// call only to be left as it came.
func notText(b64 string) bool {
	var src [512]byte
	var buf [384]byte
	n, err := base64.StdEncoding.Decode(buf[:], src[:copy(src[:], b64[:min(len(b64), len(src))&^3])])
	if err != nil {
		return false // the whole decode says what is wrong
	}
	for p := buf[:n]; len(p) > 0; {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 {
			return utf8.FullRune(p) // a rune cut at the end of the prefix is not yet wrong
		}
		p = p[size:]
	}
	return false
}

// progress masks a progress message and clips it to maxProgressMessage. It masks before
// the final cut, so a secret across the cut is not left half shown; the first cut only
// bounds the masking work, and whatever it splits lies far past the final one.
func (ms masks) progress(msg string) string {
	return textcheck.Clip(ms.text(textcheck.Clip(msg, 64*maxProgressMessage, "…")), maxProgressMessage, "…")
}

// err masks the message of a router error (an upstream's error text may quote a secret),
// and the messages of its fields: an output that fails its schema is quoted in them
// ("got ..."), and a server may echo a configured secret into it.
func (ms masks) err(err error) error {
	if e, ok := err.(*Error); ok {
		e.Message = ms.text(e.Message)
		if fields, ok := e.Details.([]verr.Field); ok {
			masked := make([]verr.Field, len(fields))
			for i, f := range fields {
				f.Field, f.Message = ms.text(f.Field), ms.text(f.Message)
				masked[i] = f
			}
			e.Details = masked
		}
	}
	return err
}
