package handlers

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

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

// bindJSON decodes the request body, turning a malformed body into a field error. An
// empty body leaves v as it is. A body must be sent as JSON (application/json or any
// +json) and be one JSON value: a form-encoded body used to bind as an empty object, so
// the request "succeeded" having done nothing. A key the shape does not have is ignored;
// routes that change things use the stricter binders below.
func bindJSON(c echo.Context, v any) error {
	_, err := bindBody(c, v, bodyRules{})
	return err
}

// bindJSONStrict is bindJSON that also refuses a key the shape does not have, at any
// depth, naming it by its pointer: a misspelt key would silently drop what it held (a
// plan's rollback, a password to set).
func bindJSONStrict(c echo.Context, v any) error {
	_, err := bindBody(c, v, bodyRules{strict: true})
	return err
}

// bindJSONCreate is bindJSONStrict for a body that creates a resource, letting through
// (unread) the top-level keys the server assigns, serverAssigned, which a client may send
// back from what it read. Only those: any other key of an answer looks like a setting
// ("expires_at", "disabled_at"), and ignoring it would leave the client believing it set.
func bindJSONCreate(c echo.Context, v any) error {
	_, err := bindBody(c, v, bodyRules{strict: true, echoed: serverAssigned})
	return err
}

// serverAssigned are the keys of a created resource's answer that only the server sets.
var serverAssigned = []string{"id", "created_at", "updated_at"}

// bindJSONChange is bindJSONStrict for a body that changes something (PATCH, PUT): it
// must name at least one field the route changes, every field of v's shape but those in
// keep (a version to check, a reason). A body of misspelt keys used to answer 200 having
// changed nothing. It returns the top-level fields given, as the shape names them.
func bindJSONChange(c echo.Context, v any, keep ...string) (map[string]bool, error) {
	given, err := bindBody(c, v, bodyRules{strict: true})
	if err != nil {
		return nil, err
	}
	var changes []string
	named := false
	for _, f := range shapeFields(derefType(reflect.TypeOf(v))) {
		if !slices.Contains(keep, f.name) {
			changes = append(changes, f.name)
			named = named || given[f.name]
		}
	}
	if !named {
		return nil, verr.New("body", "names no field this route changes; it changes: "+strings.Join(changes, ", "))
	}
	return given, nil
}

// bodyRules say how strictly a body is read.
type bodyRules struct {
	strict bool // refuse a key the shape does not have
	// echoed are top-level keys let through under strict, unread (bindJSONCreate).
	echoed []string
}

// bindBody is the binders' common part. given are the top-level fields the body named
// (read only under strict rules).
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
	dec := json.NewDecoder(bytes.NewReader(body))
	derr := dec.Decode(v)
	var se *json.SyntaxError
	if derr != nil && (errors.As(derr, &se) || errors.Is(derr, io.ErrUnexpectedEOF) || errors.Is(derr, io.EOF)) {
		return nil, decodeError(derr)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, verr.New("body", "has more after the JSON value: send one JSON value")
	}
	if derr == nil && !rules.strict {
		return nil, nil
	}
	// The decoder names neither an unknown key's place nor, for a value that decodes
	// itself (a time), its field: the body is walked beside its shape to find them.
	w := bodyWalk{bodyRules: rules, given: map[string]bool{}}
	if p := w.value(body, reflect.TypeOf(v), ""); p != nil {
		msg := p.message
		var te *json.UnmarshalTypeError
		if p.wrongType && errors.As(derr, &te) {
			msg += fmt.Sprintf(" (at byte %d)", te.Offset)
		}
		return nil, verr.New(p.ptr, msg)
	}
	if derr != nil {
		return nil, decodeError(derr)
	}
	return w.given, nil
}

// IsJSONMediaType reports whether a Content-Type is JSON: application/json or any
// +json type (application/merge-patch+json), in any case, with any parameters. (A
// malformed parameter, "charset" alone, still names the type: ParseMediaType returns it.)
func IsJSONMediaType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json")
}

// decodeError words a decoding error for the caller: the field by its pointer and the
// kind of JSON value it takes, or where the JSON stops being JSON.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		// Only when the walk beside the shape found nothing (bindBody): te.Field joins
		// names with ".", so a key holding one is split wrongly, and leaves out array
		// indexes; the byte offset says which element.
		path := "body"
		if te.Field != "" {
			var b strings.Builder
			for seg := range strings.SplitSeq(te.Field, ".") {
				b.WriteString("/" + pointerToken(seg))
			}
			path = b.String()
		}
		return verr.New(path, fmt.Sprintf("must be %s (at byte %d)", bodyKind(te.Type), te.Offset))
	case errors.As(err, &se):
		return verr.New("body", fmt.Sprintf("is not valid JSON (at byte %d)", se.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return verr.New("body", "is not valid JSON (it ends early)")
	}
	return verr.New("body", "must be a JSON object matching the documented shape: "+err.Error())
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

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

// bodyProblem is what is wrong with a body at one place.
type bodyProblem struct {
	ptr, message string
	wrongType    bool // a value of the wrong JSON type (the decoder's offset applies)
}

// bodyWalk walks a JSON body beside the Go shape it decodes into, as encoding/json
// reads it, to name by JSON pointer what the decoder cannot: a key the shape does not
// have, and a value that decodes itself (a time) but not from what was sent.
type bodyWalk struct {
	bodyRules
	given map[string]bool
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// value finds the first problem, in document order, with raw as a value of t at ptr.
func (w *bodyWalk) value(raw []byte, t reflect.Type, ptr string) *bodyProblem {
	raw = bytes.TrimSpace(raw)
	if t == nil || len(raw) == 0 || string(raw) == "null" { // null leaves any value as it is
		return nil
	}
	t = derefType(t)
	at := func(msg string, wrongType bool) *bodyProblem {
		if ptr == "" {
			return &bodyProblem{ptr: "body", message: msg, wrongType: wrongType}
		}
		return &bodyProblem{ptr: ptr, message: msg, wrongType: wrongType}
	}
	switch pt := reflect.PointerTo(t); {
	case pt.Implements(jsonUnmarshaler):
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			if t == timeType {
				return at("must be an RFC 3339 time like 2026-12-06T10:00:00Z", false)
			}
			return at("must be "+bodyKind(t), false)
		}
		return nil
	case pt.Implements(textUnmarshaler):
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return at("must be a string", true)
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return at("is not valid: "+err.Error(), false)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil // any JSON value
	case reflect.Struct:
		if raw[0] != '{' {
			return at("must be an object", true)
		}
		fields := shapeFields(t)
		var p *bodyProblem
		members(raw, func(key string, val []byte) bool {
			kp := ptr + "/" + pointerToken(key)
			f, ok := lookupField(fields, key)
			switch {
			case ok:
				if ptr == "" {
					w.given[f.name] = true
				}
				p = w.value(val, f.t, kp)
			case w.strict && !(ptr == "" && slices.ContainsFunc(w.echoed, func(e string) bool { return strings.EqualFold(e, key) })):
				p = &bodyProblem{ptr: kp, message: unknownKeyWords(fields)}
			}
			return p == nil
		})
		return p
	case reflect.Map:
		if raw[0] != '{' {
			return at("must be an object", true)
		}
		var p *bodyProblem
		members(raw, func(key string, val []byte) bool {
			p = w.value(val, t.Elem(), ptr+"/"+pointerToken(key))
			return p == nil
		})
		if p == nil && t.Key().Kind() != reflect.String {
			// A key that must be a number, say: the decoder tells.
			if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
				return at("must be "+bodyKind(t), true)
			}
		}
		return p
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && raw[0] == '"' {
			break // bytes sent as base64
		}
		if raw[0] != '[' {
			return at("must be "+bodyKind(t), true)
		}
		var p *bodyProblem
		dec := json.NewDecoder(bytes.NewReader(raw))
		_, _ = dec.Token()
		for i := 0; dec.More() && p == nil; i++ {
			var item json.RawMessage
			if dec.Decode(&item) != nil {
				return nil
			}
			p = w.value(item, t.Elem(), ptr+"/"+strconv.Itoa(i))
		}
		return p
	}
	if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
		return at("must be "+bodyKind(t), true)
	}
	return nil
}

// members calls f with each member of the JSON object raw, in order, until f returns
// false.
func members(raw []byte, f func(key string, val []byte) bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var val json.RawMessage
		if err != nil || !ok || dec.Decode(&val) != nil || !f(key, val) {
			return
		}
	}
}

// unknownKeyWords says a key is not one of fields, naming the keys that are.
func unknownKeyWords(fields []shapeField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return "is not a key of the documented body here: check its spelling; the keys here are " + strings.Join(names, ", ")
}

// shapeField is one field of a struct as encoding/json names it.
type shapeField struct {
	name string
	t    reflect.Type
}

// shapeFields lists a struct's JSON fields in declaration order, an embedded struct's
// (untagged) fields in its place unless a field of the outer struct has the name.
func shapeFields(t reflect.Type) []shapeField {
	type entry struct {
		shapeField
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
		all = append(all, entry{shapeField{name, f.Type}, false})
		direct[name] = true
	}
	out := make([]shapeField, 0, len(all))
	for _, e := range all {
		if !e.promoted || !direct[e.name] {
			out = append(out, e.shapeField)
		}
	}
	return out
}

// lookupField finds the field a key decodes into: the exact name first, then as
// encoding/json also matches, without regard to case.
func lookupField(fields []shapeField, key string) (shapeField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return shapeField{}, false
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// pointerToken escapes a key as one token of a JSON pointer (RFC 6901): "~" as "~0",
// "/" as "~1".
func pointerToken(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
