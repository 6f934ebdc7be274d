package router

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// Content is one item of a normalized result. Field names follow MCP's wire format, so
// agents read Toolwarden's results as they would a server's.
type Content struct {
	Type        string    `json:"type"` // text, image, audio, resource_link, resource
	Text        string    `json:"text,omitempty"`
	Data        string    `json:"data,omitempty"` // base64, for image and audio
	MIMEType    string    `json:"mimeType,omitempty"`
	URI         string    `json:"uri,omitempty"` // resource_link
	Name        string    `json:"name,omitempty"`
	Title       string    `json:"title,omitempty"`
	Description string    `json:"description,omitempty"`
	Size        *int64    `json:"size,omitempty"`
	Resource    *Resource `json:"resource,omitempty"` // resource (embedded)
}

// Resource is an embedded resource: text or a base64 blob.
type Resource struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// normalize turns the SDK's content into Content; a kind Toolwarden does not know is
// kept as its JSON in a text item rather than dropped.
func normalize(in []mcp.Content) []Content {
	out := make([]Content, 0, len(in))
	for _, c := range in {
		switch v := c.(type) {
		case *mcp.TextContent:
			out = append(out, Content{Type: "text", Text: v.Text})
		case *mcp.ImageContent:
			out = append(out, Content{Type: "image", Data: base64.StdEncoding.EncodeToString(v.Data), MIMEType: v.MIMEType})
		case *mcp.AudioContent:
			out = append(out, Content{Type: "audio", Data: base64.StdEncoding.EncodeToString(v.Data), MIMEType: v.MIMEType})
		case *mcp.ResourceLink:
			out = append(out, Content{Type: "resource_link", URI: v.URI, Name: v.Name, Title: v.Title,
				Description: v.Description, MIMEType: v.MIMEType, Size: v.Size})
		case *mcp.EmbeddedResource:
			item := Content{Type: "resource"}
			if v.Resource != nil {
				item.Resource = &Resource{URI: v.Resource.URI, MIMEType: v.Resource.MIMEType, Text: v.Resource.Text}
				if len(v.Resource.Blob) > 0 {
					item.Resource.Blob = base64.StdEncoding.EncodeToString(v.Resource.Blob)
				}
			}
			out = append(out, item)
		default:
			raw, err := json.Marshal(c)
			if err != nil {
				raw = []byte(fmt.Sprintf("%q", fmt.Sprint(c)))
			}
			out = append(out, Content{Type: "text", Text: string(raw)})
		}
	}
	return out
}

// maxRuntimeText bounds the text of a result a call's record keeps as its tool's last
// error and summary (well over the summary's 200 characters).
const maxRuntimeText = 4 << 10

// TextOf joins the text items of a result, for summaries and test expectations. It is
// linear in the result's size (a result may have any number of items).
func TextOf(cs []Content) string {
	return textOf(cs, -1)
}

// TextOfMax is TextOf clipped as textcheck.Clip(TextOf(cs), n, "…") would, without
// joining more than n+1 bytes: for what shows or stores a tool's text (an error of
// any length).
func TextOfMax(cs []Content, n int) string {
	return textOf(cs, n)
}

// textOf joins the text items of cs; with n >= 0 it stops past n bytes and clips.
func textOf(cs []Content, n int) string {
	var b strings.Builder
	for _, c := range cs {
		text := c.Text
		if c.Type == "resource" && c.Resource != nil {
			text = c.Resource.Text
		}
		if text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if n >= 0 && b.Len()+len(text) > n {
			b.WriteString(text[:n+1-b.Len()]) // one byte past n tells Clip it was cut
			break
		}
		b.WriteString(text)
	}
	if n < 0 {
		return b.String()
	}
	return textcheck.Clip(b.String(), n, "…")
}
