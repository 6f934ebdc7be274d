package e2e

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// chat drives one assistant conversation in the page: the /assistant page's
// (scope "main") or the slide-over's (scope "#assistant-panel").
type chat struct {
	b     *browser
	scope string
	input string // the id of the chat's message box
}

// replies counts the assistant's messages in the chat.
func (c chat) replies() int {
	c.b.t.Helper()
	return eval[int](c.b, `document.querySelectorAll(`+jsString(c.scope+` [data-testid=assistant-msg-assistant]`)+`).length`)
}

// awaitReply waits for the assistant's reply after `before` replies, checks that it says
// want and that the person's own message (said) is shown just above it, and returns the
// reply's text and the labels of its choices.
func (c chat) awaitReply(before int, said, want string) (string, []string) {
	c.b.t.Helper()
	all := `document.querySelectorAll(` + jsString(c.scope+` [data-testid=assistant-msg-assistant]`) + `)`
	c.b.waitJS("the reply to "+strconv.Quote(said)+" arrives", all+`.length > `+strconv.Itoa(before))
	last := all + `[` + all + `.length - 1]`
	text := eval[string](c.b, last+`.querySelector(".assistant-body").textContent`)
	choices := eval[[]string](c.b, `[...`+last+`.querySelectorAll("[data-testid=assistant-choice]")].map(b => b.textContent.trim())`)
	if !strings.Contains(text, want) {
		c.b.t.Fatalf("%q: the reply is %q (choices %q), want it to say %q", said, text, choices, want)
	}
	if mine := eval[string](c.b, last+`.previousElementSibling?.matches("[data-testid=assistant-msg-person]") ? `+
		last+`.previousElementSibling.textContent.trim() : ""`); mine != said {
		c.b.t.Fatalf("above the reply the log shows the person saying %q, want %q", mine, said)
	}
	return text, choices
}

// say types msg into the chat's box, sends it with Enter and waits for a reply that
// says want. The box must be empty and focused again afterwards.
func (c chat) say(msg, want string) (string, []string) {
	c.b.t.Helper()
	before := c.replies()
	c.b.do("say "+strconv.Quote(msg), chromedp.SendKeys(chromedp.ID(c.input), msg+kb.Enter))
	text, choices := c.awaitReply(before, msg, want)
	c.ready()
	return text, choices
}

// choose clicks the choice button whose label is label in the newest reply, and waits
// for the reply to what it sends; the log shows the label as the person's words (not
// the target the choice sends), then and after a reload.
func (c chat) choose(label, want string) (string, []string) {
	c.b.t.Helper()
	before := c.replies()
	all := `document.querySelectorAll(` + jsString(c.scope+` [data-testid=assistant-msg-assistant]`) + `)`
	found := eval[bool](c.b, `document.querySelectorAll("[data-e2e-pick]").forEach(b => delete b.dataset.e2ePick),
		[...`+all+`[`+all+`.length - 1].querySelectorAll("[data-testid=assistant-choice]")].some(b => {
		if (b.textContent.trim() !== `+jsString(label)+`) return false;
		b.dataset.e2ePick = "1";
		return true;
	})`)
	if !found {
		c.b.t.Fatalf("the newest reply has no choice %q", label)
	}
	c.b.do("click the choice "+strconv.Quote(label), chromedp.Click(chromedp.CSS(c.scope+` [data-e2e-pick="1"]`)))
	text, choices := c.awaitReply(before, label, want)
	c.ready()
	return text, choices
}

// ready checks that the message box is empty and has the focus.
func (c chat) ready() {
	c.b.t.Helper()
	if _, err := chromedp.Run(c.b.ctx, chromedp.Poll[bool](`document.activeElement === document.getElementById(`+jsString(c.input)+`) && document.activeElement.value === ""`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		c.b.t.Fatalf("the message box #%s is not empty and focused: %v; the focus is on %s, the box holds %q", c.input, err,
			eval[string](c.b, `document.activeElement ? document.activeElement.outerHTML.slice(0, 160) : "nothing"`),
			eval[string](c.b, `document.getElementById(`+jsString(c.input)+`)?.value ?? "(no box)"`))
	}
}

// TestBrowserAssistantGuidedSetup walks the guided set-up on /assistant in chromium, the
// way seed 004 §7 describes it: "I want to set up a new tool" → a choice → the URL of a
// real MCP server → a name → the server is added → "Yes, discover them" → the tools are
// listed with numbered choices → "1 and 2" enables those two. Every message arrives
// without a reload; the box is emptied and focused after each.
func TestBrowserAssistantGuidedSetup(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "wx"})
	ctx := context.Background()

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the assistant", chromedp.Navigate(srv.URL+"/assistant"),
		chromedp.WaitVisible(chromedp.CSS(`main [data-testid=assistant-chat]`)))
	if !eval[bool](b, `!!document.querySelector("main [data-testid=assistant-hello]")`) {
		t.Fatal("a first visit shows no greeting")
	}
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 22`))
	c := chat{b: b, scope: "main", input: "assistant-input"}

	_, choices := c.say("I want to set up a new tool", "Do you already have an MCP server")
	if !slices.Contains(choices, "I need to add one") {
		t.Fatalf("choices %q, want \"I need to add one\"", choices)
	}
	c.choose("I need to add one", "URL of the MCP server")
	// The first reply's choices stay shown, disabled, once the conversation moved on.
	if got := eval[string](b, `[...document.querySelectorAll("main [data-testid=assistant-msg-assistant]")[0].querySelectorAll("[data-testid=assistant-choice]")].map(b => b.textContent.trim() + (b.disabled ? ":off" : ":on")).join(",")`); !strings.Contains(got, "I need to add one:off") || strings.Contains(got, ":on") {
		t.Fatalf("the first reply's choices after the next reply: %q, want them shown and disabled", got)
	}
	_, choices = c.say(up.URL(), "What would you like to name this server?")
	if len(choices) != 1 {
		t.Fatalf("the name question offers %q, want one suggested name", choices)
	}
	_, choices = c.say("wx", "I've added the wx MCP server")
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE name = 'wx' AND url = $1`, up.URL()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("wx at %s is stored %d times (%v), want once", up.URL(), n, err)
	}
	if !slices.Contains(choices, "Yes, discover them") {
		t.Fatalf("choices %q, want \"Yes, discover them\"", choices)
	}
	if href := eval[string](b, `document.querySelector("main [data-testid=assistant-msg-assistant]:last-child .assistant-actions a")?.getAttribute("href") ?? ""`); !strings.HasPrefix(href, "/servers/") {
		t.Fatalf("the reply links to %q, want the new server's page", href)
	}

	_, choices = c.choose("Yes, discover them", "Which ones would you like to enable?")
	// "1. name (status)" for each tool, then "All of them" and "None".
	var listed []string
	for i, l := range choices {
		num, rest, ok := strings.Cut(l, ". ")
		if !ok || num != strconv.Itoa(i+1) {
			break
		}
		listed = append(listed, strings.Fields(rest)[0])
	}
	if len(listed) < 3 || !slices.Contains(choices, "All of them") {
		t.Fatalf("discovery offers %q, want numbered tools and \"All of them\"", choices)
	}
	// Enabling needs the tools validated, which follows discovery.
	webtest.WaitFor(t, 30*time.Second, func() bool {
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
			WHERE s.name = 'wx' AND t.status IN ('discovered', 'validating')`).Scan(&n)
		return n == 0
	}, "wx's tools were never validated")

	c.say("1 and 2", "I've enabled 2 tools")
	rows, err := srv.Pool.Query(ctx, `SELECT t.name, t.status FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE s.name = 'wx'`)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for rows.Next() {
		var name, st string
		if err := rows.Scan(&name, &st); err != nil {
			t.Fatal(err)
		}
		status[name] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i, name := range listed {
		want := i < 2
		if got := status[name] == "enabled"; got != want {
			t.Errorf("tool %d, %s, is %q; enabled wanted: %v", i+1, name, status[name], want)
		}
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 22 {
		t.Fatal("the conversation reloaded the page; replies should be added in place")
	}
	if n := eval[int](b, `document.querySelectorAll("main [data-testid=assistant-msg-person]").length`); n != 6 {
		t.Fatalf("the log shows %d messages from the person, want 6", n)
	}
	screenshot(t, b, "assistant-setup.png")

	// The conversation is kept: a reload shows it again, and it goes on.
	b.do("reload the page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`main [data-testid=assistant-chat]`)))
	if n := eval[int](b, `document.querySelectorAll("main [data-testid=assistant-msg-assistant]").length`); n != 6 {
		t.Fatalf("after a reload the log shows %d replies, want 6", n)
	}
	b.do("focus the box", chromedp.Focus(chromedp.ID("assistant-input")))
	c.say("show me all tools on wx", "Here are the")

	// What the person types while a reply is on its way stays in the box (typing is
	// simulated at the instant the request leaves, after its message was taken).
	b.do("type on while the next reply comes", chromedp.Evaluate[chromedp.Void](`document.addEventListener("htmx:beforeSend",
		() => { document.getElementById("assistant-input").value = "and then" }, { once: true })`))
	before := c.replies()
	b.do("say list servers", chromedp.SendKeys(chromedp.ID("assistant-input"), "list servers"+kb.Enter))
	c.awaitReply(before, "list servers", "There is one MCP server")
	if got := eval[string](b, `document.getElementById("assistant-input").value`); got != "and then" {
		t.Errorf("what was typed while the reply came reads %q, want \"and then\"", got)
	}

	// Another window of the conversation (the same person, here over the API) moves it
	// on: "the first one" typed in this page, which has not shown that, changes nothing.
	// The form sends the last turn the page showed, which each reply updates.
	if got := eval[string](b, `document.querySelector("main [data-assistant-form] input[name=seen]").value`); got != "8" {
		t.Fatalf("after 8 replies the form sends seen %q", got)
	}
	conv := eval[string](b, `document.querySelector("main [data-assistant-form] input[name=conversation_id]").value`)
	other := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	other.JSON(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"conversation_id": conv, "message": "show me all servers"}, http.StatusOK, nil)
	b.do("empty the box", chromedp.Evaluate[chromedp.Void](`document.getElementById("assistant-input").value = ""`))
	c.say("tell me about the first one", "went on in another window")
	b.do("reload the page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`main [data-testid=assistant-chat]`)))
	b.do("focus the box", chromedp.Focus(chromedp.ID("assistant-input")))
	c.say("tell me about the first one", "wx (")
	b.checkConsole()
}

// TestBrowserAssistantPanelChoice uses the slide-over from /tools: two servers offer a
// tool named echo, so "disable echo" asks which one with numbered choice buttons and
// changes nothing until one is clicked; clicking the second disables that server's echo
// only. Escape closes the slide-over and gives the focus back to the header's link.
func TestBrowserAssistantPanelChoice(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	srv.LiveServer(t, "ev1", true, "echo")
	srv.LiveServer(t, "ev2", true, "echo")
	echoStatus := func() map[string]string {
		t.Helper()
		rows, err := srv.Pool.Query(ctx, `SELECT s.name, t.status FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE t.name = 'echo'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var name, st string
			if err := rows.Scan(&name, &st); err != nil {
				t.Fatal(err)
			}
			out[name] = st
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if st := echoStatus(); st["ev1"] != "enabled" || st["ev2"] != "enabled" {
		t.Fatalf("echo: %v, want enabled on ev1 and ev2", st)
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 2`))
	if eval[bool](b, `document.getElementById("assistant-panel").checkVisibility()`) {
		t.Fatal("the slide-over is open before the Assistant link is clicked")
	}

	b.do("open the slide-over", chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)),
		chromedp.WaitVisible(chromedp.ID("assistant-panel-input")))
	if loc := eval[string](b, `location.pathname`); loc != "/tools" {
		t.Fatalf("the Assistant link went to %s; it should open the slide-over over /tools", loc)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=assistant-open]").getAttribute("aria-expanded")`); got != "true" {
		t.Fatalf("the link's aria-expanded = %q with the slide-over open, want true", got)
	}
	c := chat{b: b, scope: "#assistant-panel", input: "assistant-panel-input"}
	c.ready()

	_, choices := c.say("disable echo", "Did you mean")
	if len(choices) != 2 || !strings.HasPrefix(choices[0], "1. ") || !strings.HasPrefix(choices[1], "2. ") {
		t.Fatalf("choices %q, want two numbered ones", choices)
	}
	if st := echoStatus(); st["ev1"] != "enabled" || st["ev2"] != "enabled" {
		t.Fatalf("echo changed before a choice was clicked: %v", st)
	}
	// Each choice names the tool, its server and what it does ("2. echo on ev2 — Echoes…").
	for i, ch := range choices {
		if !strings.HasPrefix(ch, strconv.Itoa(i+1)+". echo on ev") || !strings.Contains(ch, " — Echoes") {
			t.Fatalf("choice %q, want \"%d. echo on <server> — <description>\"", ch, i+1)
		}
	}
	picked, other := "ev1", "ev2"
	if strings.HasPrefix(choices[1], "2. echo on ev2 ") {
		picked, other = "ev2", "ev1"
	}
	screenshot(t, b, "assistant-panel-choices.png")
	c.choose(choices[1], "disabled")
	if st := echoStatus(); st[picked] != "disabled" || st[other] != "enabled" {
		t.Fatalf("after clicking %q echo is %v, want disabled on %s only", choices[1], st, picked)
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 2 {
		t.Fatal("the slide-over's conversation reloaded the page")
	}

	// Keyboard: Escape closes it and the focus goes back to the link that opened it.
	b.do("press Escape", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.ID("assistant-panel")))
	if !eval[bool](b, `document.activeElement === document.querySelector("[data-testid=assistant-open]")`) {
		t.Fatalf("after Escape the focus is on %s, want the Assistant link",
			eval[string](b, `document.activeElement?.outerHTML.slice(0, 120) ?? "nothing"`))
	}
	if got := eval[string](b, `document.querySelector("[data-testid=assistant-open]").getAttribute("aria-expanded")`); got != "false" {
		t.Fatalf("the link's aria-expanded = %q after Escape, want false", got)
	}

	// Reopened from the keyboard, it still holds the conversation; Close closes it too.
	b.do("reopen with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.ID("assistant-panel-input")))
	c.ready()
	if n := c.replies(); n != 2 {
		t.Fatalf("the reopened slide-over shows %d replies, want 2", n)
	}
	b.do("click Close", chromedp.Click(chromedp.CSS(`[data-testid=assistant-close]`)), chromedp.WaitNotVisible(chromedp.ID("assistant-panel")))
	if !eval[bool](b, `document.activeElement === document.querySelector("[data-testid=assistant-open]")`) {
		t.Fatal("after Close the focus is not on the Assistant link")
	}

	// On another page the slide-over loads the same conversation from the server.
	b.do("open the servers page", chromedp.Navigate(srv.URL+"/servers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=assistant-open]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)),
		chromedp.WaitVisible(chromedp.ID("assistant-panel-input")))
	if n := c.replies(); n != 2 {
		t.Fatalf("the slide-over on /servers shows %d replies of the conversation, want 2", n)
	}
	b.checkConsole()
}
