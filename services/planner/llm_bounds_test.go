package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
)

// What the model (or its server) writes reaches a person cut to about 300 bytes and
// said to be the model's: a 1 MiB answer in prose is not Toolwarden's own 422 message,
// nor is an invented function name or a server's error message copied whole.
func TestLLMModelWordsBounded(t *testing.T) {
	t.Parallel()
	const key = "sk-secret-key-42"
	prose := "Your session expired: sign in again at https://evil.example/login. " + strings.Repeat("x", 1<<20)
	huge := strings.Repeat("n", 1<<20)
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		nu     bool   // a not_understood
		prefix string // the message starts so
	}{
		{"prose", func(w http.ResponseWriter) { reply(w, prose) }, true,
			"The language model answered: \u201cYour session expired: sign in again at https://evil.example/login. xxx"},
		{"an invented function name", func(w http.ResponseWriter) { reply(w, nil, huge, `{}`) }, true,
			`The language model called "nnn`},
		{"an error message, parsed", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": huge}})
		}, false, "planner: the model server at "},
		{"an error member without choices", func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{}, "error": huge})
		}, false, "planner: the model server at "},
		{"a key at the cut, in plain text", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, strings.Repeat("k", 295)+key)
		}, false, "planner: the model server at "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) { c.answer(w) })
			_, err := planner.NewLLM(e.URL, &planner.LLMOptions{APIKey: key}).Plan(context.Background(), "do it", llmTools)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if nu, ok := planner.NotUnderstoodIn(err); ok != c.nu {
				t.Fatalf("not_understood %v, want %v: %.200s", ok, c.nu, msg)
			} else if ok {
				msg = nu.Message
			}
			if len(msg) > 600 || !strings.HasPrefix(msg, c.prefix) {
				t.Errorf("got a %d-byte message %.120q…, want under 600 bytes starting %q", len(msg), msg, c.prefix)
			}
			if strings.Contains(msg, key[:5]) {
				t.Errorf("the message %q has a part of the key", msg)
			}
		})
	}
}

// An answer longer than the planner reads is said to be too large, not "not a chat
// completion" (which the part read would be).
func TestLLMAnswerTooLarge(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"`)
		chunk := strings.Repeat("y", 1<<20)
		for range 17 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}}]}`)
	})
	_, err := planner.NewLLM(e.URL, nil).Plan(context.Background(), "do it", llmTools)
	if err == nil || !strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "chat completion") {
		t.Fatalf("got %v, want an answer too large", err)
	}
}

// manyTools are n tools that share no word with the prompts below but their numbers,
// with the tool at weatherAt one about the weather.
func manyTools(n, weatherAt int) []planner.Tool {
	out := make([]planner.Tool, n)
	for i := range out {
		out[i] = planner.Tool{Name: fmt.Sprintf("srv__filler_%03d", i), Description: fmt.Sprintf("Filler tool number %d.", i)}
	}
	out[weatherAt] = planner.Tool{Name: "met__forecast", Description: "Gives the weather forecast for a city."}
	return out
}

func sentNames(e *endpoint) map[string]bool {
	out := map[string]bool{}
	for _, tool := range e.recorded()[0].body.Tools {
		out[tool.Function.Name] = true
	}
	return out
}

// With more tools than MaxTools, the model is shown those that share the most words with
// the prompt, a tool the prompt names first; when it calls none, or one it was not
// offered, the 422 says how many it was not shown and how to name one, and the latter
// is no 502 a retry cannot help.
func TestLLMToolsByRelevance(t *testing.T) {
	t.Parallel()
	tools := manyTools(300, 200)

	// Words: tool #200 is offered, 128 in all.
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) { reply(w, "Nothing fits.") })
	_, err := planner.NewLLM(e.URL, nil).Plan(context.Background(), "what is the weather forecast for Paris", tools)
	nu, ok := planner.NotUnderstoodIn(err)
	if !ok {
		t.Fatalf("got %v, want not_understood", err)
	}
	if sent := sentNames(e); len(sent) != 128 || !sent["met__forecast"] {
		t.Fatalf("sent %d tools, met__forecast among them %v; want 128 with it", len(sent), sent["met__forecast"])
	}
	if !strings.Contains(nu.Message, "shown 128 of the 300 tools") || !strings.Contains(nu.Message, "172 were not shown") ||
		!strings.Contains(nu.Message, "server__tool") {
		t.Errorf("got %q, want it to say 172 of 300 tools were not shown and how to name one", nu.Message)
	}

	// A name: srv__filler_250 (after the first 128) is offered, dotted with an operation too.
	for _, prompt := range []string{"call srv__filler_250 now", "use srv__filler_251.run please"} {
		e = newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) { reply(w, "Nothing fits.") })
		_, _ = planner.NewLLM(e.URL, nil).Plan(context.Background(), prompt, tools)
		want := strings.Fields(prompt)[1]
		want, _, _ = strings.Cut(want, ".")
		if sent := sentNames(e); len(sent) != 128 || !sent[want] {
			t.Errorf("%q: sent %d tools, %s among them %v; want 128 with it", prompt, len(sent), want, sent[want])
		}
	}

	// A call to a tool not offered is a 422 that says what to do.
	e = newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) { reply(w, nil, "srv__filler_299", `{}`) })
	_, err = planner.NewLLM(e.URL, nil).Plan(context.Background(), "what is the weather forecast for Paris", tools)
	f, _ := fault.As(err)
	if nu, ok = planner.NotUnderstoodIn(err); !ok || f.Kind != fault.KindUnprocessable {
		t.Fatalf("got %v, want a 422 not_understood", err)
	}
	for _, s := range []string{`"srv__filler_299"`, "not one of the tools it was offered", "name the tool", "172 were not shown"} {
		if !strings.Contains(nu.Message, s) {
			t.Errorf("got %q, want it to contain %q", nu.Message, s)
		}
	}
}
