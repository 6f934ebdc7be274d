package handlers

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// formErrors turns a *verr.Error into per-field messages; ok is false for other errors.
func formErrors(err error) (views.FormErrors, bool) {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return nil, false
	}
	// Several problems with one field (a template's, each at its line): one a line,
	// joined once (joined as they come, many problems cost the square of their length).
	lines := map[string][]string{}
	for _, f := range ve.Fields {
		lines[f.Field] = append(lines[f.Field], f.Message)
	}
	fe := views.FormErrors{}
	for field, ls := range lines {
		fe[field] = strings.Join(ls, "\n")
	}
	return fe, true
}

// userMessage is the text to show a person for an error that is theirs to fix
// (a conflict or bad input), and false for anything else.
func userMessage(err error) (string, bool) { return httperr.PageMessage(err) }

// bindJSONStrict decodes the request body into v, turning a malformed body into a field
// error. An empty body leaves v as it is. A body must be sent as JSON (application/json
// or any +json) and be one JSON value: a form-encoded body used to bind as an empty
// object, so the request "succeeded" having done nothing. A key the shape does not have
// is refused, at any depth, naming it by its pointer: a misspelt key would silently drop
// what it held (a plan's rollback, a password to set).
func bindJSONStrict(c echo.Context, v any) error {
	_, err := bindBody(c, v, bodyRules{})
	return err
}

// bindJSONCreate is bindJSONStrict for a body that creates a resource, letting through
// (unread) the top-level keys the server assigns, serverAssigned, which a client may send
// back from what it read. Only those: any other key of an answer looks like a setting
// ("expires_at", "disabled_at"), and ignoring it would leave the client believing it set.
func bindJSONCreate(c echo.Context, v any) error {
	_, err := bindBody(c, v, bodyRules{echoed: serverAssigned})
	return err
}

// serverAssigned are the keys of a created resource's answer that only the server sets.
var serverAssigned = []string{"id", "created_at", "updated_at"}

// bindJSONChange is bindJSONStrict for a body that changes something (PATCH, PUT): it
// must name at least one field the route changes, every field of v's shape but those in
// keep (a version to check, a reason). A body of misspelt keys used to answer 200 having
// changed nothing. It returns the top-level fields given, as the shape names them.
func bindJSONChange(c echo.Context, v any, keep ...string) (map[string]bool, error) {
	given, err := bindBody(c, v, bodyRules{given: true})
	if err != nil {
		return nil, err
	}
	var changes []string
	named := false
	for _, name := range shapeFields(derefType(reflect.TypeOf(v))) {
		if !slices.Contains(keep, name) {
			changes = append(changes, name)
			named = named || given[name]
		}
	}
	if !named {
		return nil, verr.New("body", "names no field this route changes; it changes: "+strings.Join(changes, ", "))
	}
	return given, nil
}

// bodyRules say what a binder needs read from the top level of a body before it is
// decoded.
type bodyRules struct {
	echoed []string // top-level keys let through unread (bindJSONCreate)
	given  bool     // report the top-level fields the body names (bindJSONChange)
}

// bodyOptions decode as encoding/json does (a null leaves a value as it is, a key
// matches its field regardless of case as strings.EqualFold does, an unexported embedded
// struct's fields are promoted) but refuse a key the shape does not have, and stop at
// the first problem, reported with its JSON pointer: the legacy errors name neither an
// unknown key nor, for a value that decodes itself (a time), its place.
var bodyOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
	jsonv2.RejectUnknownMembers(true), jsonv1.ReportErrorsWithLegacySemantics(false))

// bindBody is the binders' common part. given are the top-level fields the body named
// (read only when rules.given).
func bindBody(c echo.Context, v any, rules bodyRules) (given map[string]bool, err error) {
	req := c.Request()
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	// Put back for a handler that reads on (a test's connection drained to its end).
	req.Body = io.NopCloser(bytes.NewReader(body))
	// A form body was read (and emptied) by web's text check; it still was a body.
	sent := len(body) > 0 || req.ContentLength > 0 || len(req.PostForm) > 0 || req.MultipartForm != nil
	if !sent {
		return nil, nil
	}
	if !IsJSONMediaType(req.Header.Get(echo.HeaderContentType)) {
		return nil, verr.New("body", "send the body as JSON with Content-Type: application/json")
	}
	if ptr, bad := textcheck.CaseClash(body, v); bad {
		return nil, verr.New(ptr, textcheck.WhyCaseClash)
	}
	// Duplicate keys and text that is not text were refused on the raw body before this
	// (web's text check).
	if rules.given || len(rules.echoed) > 0 {
		if body, given, err = topLevel(body, reflect.TypeOf(v), rules.echoed); err != nil {
			return nil, decodeError(body, err)
		}
	}
	// One pass, v decoded once: the body of a tool call may carry megabytes of arguments.
	// A bytes.Buffer is read in place, not copied.
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), bodyOptions)
	if err := jsonv2.UnmarshalDecode(dec, v); err != nil {
		return nil, decodeError(body, err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, verr.New("body", "has more after the JSON value: send one JSON value")
	}
	return given, nil
}

// topLevel reads the members of an object body of shape t: the fields they name, and the
// body without the keys in echoed that name no field, blanked so that byte offsets in
// errors still count in what was sent. It fails only on what is not JSON (before any
// unknown key is named, as for any binder); a body that is another JSON value is
// returned as it is, for the decoder to word.
func topLevel(body []byte, t reflect.Type, echoed []string) (_ []byte, given map[string]bool, err error) {
	fields := shapeFields(derefType(t))
	given = map[string]bool{}
	type member struct {
		start, end int64 // the name's first byte, the value's end
		drop       bool
	}
	var ms []member
	lastKept := -1
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), bodyOptions)
	if dec.PeekKind() != '{' {
		return body, given, dec.SkipValue() // nil for another JSON value
	}
	if _, err := dec.ReadToken(); err != nil {
		return body, nil, err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return body, nil, err
		}
		start := dec.InputOffset() - int64(len(name))
		key, err := jsontext.AppendUnquote(nil, name)
		if err == nil {
			err = dec.SkipValue()
		}
		if err != nil {
			return body, nil, err
		}
		m := member{start: start, end: dec.InputOffset()}
		if f, ok := lookupField(fields, string(key)); ok {
			given[f] = true
		} else {
			m.drop = slices.ContainsFunc(echoed, func(e string) bool { return strings.EqualFold(e, string(key)) })
		}
		if !m.drop {
			lastKept = len(ms)
		}
		ms = append(ms, m)
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return body, nil, err
	}
	if !slices.ContainsFunc(ms, func(m member) bool { return m.drop }) {
		return body, given, nil
	}
	out := bytes.Clone(body) // the body put back for a handler stays as sent
	for i, m := range ms {
		if !m.drop {
			continue
		}
		// With the comma after it while a kept member follows, else the one before it.
		from, to := m.start, m.end
		if i < lastKept {
			to = ms[i+1].start
		} else if i > 0 {
			from = ms[i-1].end
		}
		for j := from; j < to; j++ {
			out[j] = ' '
		}
	}
	return out, given, nil
}

// IsJSONMediaType reports whether a Content-Type is JSON: application/json or any
// +json type (application/merge-patch+json), in any case, with any parameters. (A
// malformed parameter, "charset" alone, still names the type: ParseMediaType returns it.)
func IsJSONMediaType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json")
}

// decodeError words a decoding error of body for the caller, from the error's parts
// only (its text names Go types and time layouts): the place by its pointer and the kind
// of JSON value it takes, or where the JSON stops being JSON.
func decodeError(body []byte, err error) error {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return verr.New("body", "is not valid JSON (it ends early)")
	case errors.As(err, &syn):
		// Counted as encoding/json did, the byte at fault included (the error gives its
		// place).
		return verr.New("body", fmt.Sprintf("is not valid JSON (at byte %d)", syn.ByteOffset+1))
	case errors.As(err, &sem):
		ptr := string(sem.JSONPointer) // escaped already: a key "a/b" is the token "a~1b"
		if ptr == "" {
			ptr = "body"
		}
		t := derefType(sem.GoType)
		switch {
		case errors.Is(sem.Err, jsonv2.ErrUnknownName):
			return verr.New(ptr, "is not a key of the documented body here: check its spelling; the keys here are "+
				strings.Join(shapeFields(t), ", "))
		case t == timeType:
			return verr.New(ptr, "must be an RFC 3339 time like 2026-12-06T10:00:00Z")
		case t != nil && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)):
			// A value that decodes itself: its error's words may be Go's, so only the kind
			// it takes is said.
			return verr.New(ptr, "must be "+bodyKind(t))
		}
		return verr.New(ptr, fmt.Sprintf("must be %s (at byte %d)", bodyKind(t), valueEnd(body, sem.ByteOffset)))
	}
	return verr.New("body", "must be a JSON object matching the documented shape")
}

// valueEnd is where encoding/json placed a wrong value at off in body (the errors here
// give its start): just past a number, string or literal, or past the "[" or "{" that
// opens an array or object; off if there is no value there.
func valueEnd(body []byte, off int64) int64 {
	if off < 0 || off >= int64(len(body)) {
		return off
	}
	if body[off] == '[' || body[off] == '{' {
		return off + 1
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(body[off:]), bodyOptions)
	if dec.SkipValue() != nil {
		return off
	}
	return off + dec.InputOffset()
}

var (
	jsonUnmarshaler = reflect.TypeFor[jsonv2.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// bodyKind names the JSON value that decodes into t, with its article.
func bodyKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value of another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string (base64)"
		}
		return "an array"
	}
	return "a JSON value of another type"
}

// shapeFields lists a struct's JSON field names in declaration order, an embedded
// struct's (untagged) fields in its place unless a field of the outer struct has the
// name: the keys to name when one is unknown, and those a change may give. (The decoder
// matches keys to fields itself.)
func shapeFields(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	type entry struct {
		name     string
		promoted bool
	}
	var all []entry
	direct := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if ft := f.Type; ft.Kind() == reflect.Struct || ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && f.IsExported() {
				for _, sf := range shapeFields(derefType(ft)) {
					all = append(all, entry{sf, true})
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, entry{name, false})
		direct[name] = true
	}
	out := make([]string, 0, len(all))
	for _, e := range all {
		if !e.promoted || !direct[e.name] {
			out = append(out, e.name)
		}
	}
	return out
}

// lookupField finds the field a top-level key decodes into, as the decoder matches it:
// the exact name first, then without regard to case (strings.EqualFold).
func lookupField(fields []string, key string) (string, bool) {
	if slices.Contains(fields, key) {
		return key, true
	}
	for _, f := range fields {
		if strings.EqualFold(f, key) {
			return f, true
		}
	}
	return "", false
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
