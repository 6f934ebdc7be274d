package router

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// An image's or audio's data that is text is masked as an embedded blob is, and so is
// every MIME type: a server can put a secret in either, and both left the router as they
// came. Bytes that are not text (a real image) are left alone, however far in the first
// byte that is not text lies.
func TestMasksImageAndAudio(t *testing.T) {
	t.Parallel()
	const secret = "sk-configured-0123456789"
	ms := masks{secrets.Maskers{secrets.NewMasker(secret), nil}}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	long := strings.Repeat("x", 1000) + secret                               // text past the prefix notText reads
	lateBinary := append([]byte(strings.Repeat("y", 700)+"\xff"), secret...) // not text, but only past that prefix
	png := append([]byte("\x89PNG\r\n\x1a\n"), secret...)                    // not text from its first byte
	res := &Result{Content: []Content{
		{Type: "image", Data: b64([]byte("API_KEY=" + secret)), MIMEType: "image/png"},
		{Type: "audio", Data: b64([]byte(long)), MIMEType: "audio/" + secret},
		{Type: "image", Data: b64(png), MIMEType: "image/png"},
		{Type: "audio", Data: b64(lateBinary), MIMEType: "audio/wav"},
		{Type: "resource", Resource: &Resource{URI: "mem://x", MIMEType: "text/" + secret, Blob: b64([]byte(secret))}},
		{Type: "resource_link", URI: "mem://y", MIMEType: "text/" + secret},
	}}
	ms.result(res)
	data := func(i int) []byte {
		b, err := base64.StdEncoding.DecodeString(res.Content[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := data(0); string(got) != "API_KEY=***" {
		t.Errorf("image data that is text reads %q, want the secret masked", got)
	}
	if got := data(1); string(got) != strings.Repeat("x", 1000)+"***" {
		t.Errorf("audio data that is text reads ...%q, want the secret masked", got[len(got)-30:])
	}
	if got := data(2); !bytes.Equal(got, png) {
		t.Errorf("a PNG's bytes were changed: %q", got)
	}
	if got := data(3); !bytes.Equal(got, lateBinary) {
		t.Errorf("bytes that are not text past the first 384 were changed")
	}
	for i, c := range res.Content {
		mime := c.MIMEType
		if c.Resource != nil {
			mime = c.Resource.MIMEType
		}
		if strings.Contains(mime, secret) {
			t.Errorf("item %d: MIME type %q still shows the secret", i, mime)
		}
	}
	// Without secrets nothing is decoded or changed.
	plain := &Result{Content: []Content{{Type: "image", Data: b64([]byte("text")), MIMEType: "image/png"}}}
	masks{}.result(plain)
	if plain.Content[0].Data != b64([]byte("text")) {
		t.Error("data changed with no secrets to mask")
	}
}
