package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
)

// Decode reads what encoding/json reads, to the same values (numbers as written, a
// repeated key's last value, invalid UTF-8 and lone surrogates as U+FFFD), refuses what
// it refuses, and keeps the keys in the order they first appear.
func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"b":1,"a":[1,2.5e3,-0,1e400,0.1],"b":2}`, "\"\xff\xfe\"", `"\ud800"`, `"\ud83d\ude00"`, `"\u0000"`,
		`{"x":{"y":null,"z":true,"w":false}}`, ` [ ] `, `{}`, `{"a":"\n\t\u00e9"}`, `[[[[]]]]`, `{"\u00e9":1}`,
		"{\"a\":\"\x80\"}", `-1.5E-7`, `"<&>"`,
		`{"a":}`, `[1,]`, `{"a":1} x`, `{"a":1}{}`, `01`, `"abc`, ``, `   `, `nul`, `{"a":1,}`, `{`, `[`, `{"a"`,
	} {
		got, err := Decode([]byte(in))
		dec := json.NewDecoder(bytes.NewReader([]byte(in)))
		dec.UseNumber()
		var want any
		werr := dec.Decode(&want)
		if werr == nil && dec.More() {
			werr = errors.New("trailing data")
		}
		if (err == nil) != (werr == nil) {
			t.Errorf("%q: Decode error %v, encoding/json error %v", in, err, werr)
			continue
		}
		if err != nil {
			continue
		}
		if g := withMaps(got); !reflect.DeepEqual(g, want) {
			t.Errorf("%q: Decode %#v, encoding/json %#v", in, g, want)
		}
	}
	v, _ := Decode([]byte(`{"b":1,"a":2,"b":3,"c":4}`))
	if keys := v.(*Object).Keys(); !slices.Equal(keys, []string{"b", "a", "c"}) {
		t.Errorf("keys %v, want b a c", keys)
	}
	for in, want := range map[string]error{``: io.EOF, `{"a":[1`: io.ErrUnexpectedEOF, `"abc`: io.ErrUnexpectedEOF} {
		if _, err := Decode([]byte(in)); !errors.Is(err, want) {
			t.Errorf("%q: error %v, want %v", in, err, want)
		}
	}
}

// withMaps turns Decode's objects into maps, as encoding/json decodes them.
func withMaps(v any) any {
	switch t := v.(type) {
	case *Object:
		m := map[string]any{}
		for _, k := range t.Keys() {
			x, _ := t.Get(k)
			m[k] = withMaps(x)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = withMaps(x)
		}
		return a
	}
	return v
}
