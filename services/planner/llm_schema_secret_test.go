package planner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// A credential written into a tool's input schema (a default, const or enum value
// shaped like a token, or a default under a name that always holds one) does not reach
// the model's provider; the rest of the schema, plain defaults and enums with it, does.
func TestLLMDropsSecretSchemaValues(t *testing.T) {
	t.Parallel()
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
		reply(w, nil, "gh__user", `{}`)
	})
	schema := `{"type":"object","properties":{` +
		`"token":{"type":"string","default":"` + token + `"},` +
		`"auth":{"type":"object","properties":{"password":{"type":"string","default":"hunter2hunter2"},"mode":{"const":"Bearer 0123456789abcdefABCDEF"}}},` +
		`"keys":{"type":"array","items":{"type":"string","enum":["sk-proj-0123456789abcdefghij0123","other"]}},` +
		`"only":{"enum":["xoxb-0123456789-abcdefghij"]},` +
		`"opts":{"type":"object","default":{"api_key":"abc123"}},` +
		`"format":{"type":"string","default":"json","enum":["json","yaml"]},` +
		`"page_token":{"type":"string","default":"first"}}}`
	tools := []planner.Tool{{Name: "gh__user", Description: "Who am I", InputSchema: json.RawMessage(schema)}}
	if _, err := planner.NewLLM(e.URL, nil).Plan(context.Background(), "who am I on github", tools); err != nil {
		t.Fatal(err)
	}
	sent := string(e.recorded()[0].body.Tools[0].Function.Parameters)
	for _, secret := range []string{token, "hunter2", "Bearer 0123", "sk-proj-", "xoxb-", "abc123"} {
		if strings.Contains(sent, secret) {
			t.Errorf("the schema sent holds %q: %s", secret, sent)
		}
	}
	var got struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(sent), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"token":      `{"type":"string"}`,
		"auth":       `{"properties":{"mode":{},"password":{"type":"string"}},"type":"object"}`,
		"keys":       `{"items":{"enum":["other"],"type":"string"},"type":"array"}`,
		"only":       `{}`,
		"opts":       `{"type":"object"}`,
		"format":     `{"default":"json","enum":["json","yaml"],"type":"string"}`,
		"page_token": `{"default":"first","type":"string"}`,
	}
	for name, w := range want {
		b, _ := json.Marshal(got.Properties[name])
		if string(b) != w {
			t.Errorf("%s as sent: %s, want %s", name, b, w)
		}
	}
}
