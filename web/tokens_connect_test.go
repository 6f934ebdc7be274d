package web_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// connectConfigs are the configurations the "Connect an agent" panel must show for a
// server at origin with token, exactly.
func connectConfigs(origin, token string) map[string]string {
	return map[string]string{
		"claude-code": `claude mcp add --transport http toolwarden ` + origin + `/mcp --header "Authorization: Bearer ` + token + `"`,
		"vscode": `{
  "servers": {
    "toolwarden": {
      "type": "http",
      "url": "` + origin + `/mcp",
      "headers": {
        "Authorization": "Bearer ` + token + `"
      }
    }
  }
}`,
		"cursor": `{
  "mcpServers": {
    "toolwarden": {
      "url": "` + origin + `/mcp",
      "headers": {
        "Authorization": "Bearer ` + token + `"
      }
    }
  }
}`,
		"json": `{
  "mcpServers": {
    "toolwarden": {
      "type": "http",
      "url": "` + origin + `/mcp",
      "headers": {
        "Authorization": "Bearer ` + token + `"
      }
    }
  }
}`,
	}
}

func checkConnect(t *testing.T, doc *goquery.Document, origin, token string) {
	t.Helper()
	panel := doc.Find("[data-testid=connect-panel]")
	if panel.Length() != 1 {
		t.Fatal("no Connect an agent panel")
	}
	for key, want := range connectConfigs(origin, token) {
		if got := panel.Find("[data-testid=connect-config-" + key + "]").Text(); got != want {
			t.Errorf("%s configuration:\n%s\nwant\n%s", key, got, want)
		}
		// Each is a tab controlling its panel, with a copy button for it.
		tab := panel.Find("[data-testid=connect-tab-" + key + "]")
		if r, _ := tab.Attr("role"); r != "tab" || tab.AttrOr("aria-controls", "") != "connect-"+key ||
			panel.Find("#connect-"+key+"[role=tabpanel] button[data-copy=connect-config-"+key+"]").Length() != 1 {
			t.Errorf("%s: not a tab with its panel and copy button", key)
		}
	}
	if got := panel.Find("[data-testid=connect-mcp-url]").Text(); got != origin+"/mcp" {
		t.Errorf("MCP URL %q, want %s/mcp", got, origin)
	}
	if got := panel.Find("[data-testid=connect-sse-url]").Text(); got != origin+"/sse" {
		t.Errorf("SSE URL %q, want %s/sse", got, origin)
	}
	if n := panel.Find("[role=tab][aria-selected=true]").Length(); n != 1 {
		t.Errorf("%d selected tabs, want 1", n)
	}
	if n := panel.Find("[role=tabpanel]:not([hidden])").Length(); n != 1 {
		t.Errorf("%d visible tab panels, want 1", n)
	}
}

// /tokens has ready-to-paste configuration for MCP clients, with this server's URL and
// a placeholder for the token; right after a token is created, with that token.
func TestTokensConnectPanel(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)

	doc := page(t, srv.Get(t, admin, "/tokens"))
	checkConnect(t, doc, srv.URL, "<your token>")
	if doc.Find("[data-testid=connect-token-placeholder]").Length() != 1 {
		t.Error("no word on replacing the placeholder")
	}

	res := srv.PostForm(t, admin, "/tokens", url.Values{"name": {"claude"}})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create a token: %d", res.StatusCode)
	}
	doc = page(t, res)
	token := strings.TrimSpace(doc.Find("[data-testid=secret-value]").Text())
	if !strings.HasPrefix(token, "tw_") {
		t.Fatalf("the token shown: %q", token)
	}
	checkConnect(t, doc, srv.URL, token)
	if doc.Find("[data-testid=connect-token-filled]").Length() != 1 {
		t.Error("no word that the token is filled in")
	}

	// Shown once: the next visit has the placeholder again.
	doc = page(t, srv.Get(t, admin, "/tokens"))
	if strings.Contains(doc.Find("[data-testid=connect-panel]").Text(), token) {
		t.Fatal("the token is still in the panel on the next visit")
	}
}

// Behind a trusted proxy the URL is the one the client used (X-Forwarded-Proto and
// X-Forwarded-Host); from anyone else those headers are ignored.
func TestTokensConnectBehindProxy(t *testing.T) {
	t.Parallel()
	get := func(srv *webtest.Server) *goquery.Document {
		admin := srv.Login(t, "admin", webtest.AdminPassword)
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tokens", nil)
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "tw.example.com")
		// The session as a browser behind the proxy holds it: over TLS its cookie is
		// __Host-tw_session (a cookie jar keeps that one for https URLs only).
		u, _ := url.Parse(srv.URL)
		for _, ck := range admin.Jar.Cookies(u) {
			if ck.Name == "tw_session" {
				req.AddCookie(&http.Cookie{Name: "__Host-tw_session", Value: ck.Value})
			}
		}
		res, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return page(t, res)
	}
	proxied := webtest.Start(t, &webtest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	checkConnect(t, get(proxied), "https://tw.example.com", "<your token>")
	direct := webtest.Start(t, nil)
	checkConnect(t, get(direct), direct.URL, "<your token>")
}
