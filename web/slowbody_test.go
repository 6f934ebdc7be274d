package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A request whose body arrives slowly is checked again once it has: a token revoked
// while its body was being sent does nothing, though it authenticated when the headers
// came (a client may take a minute over a body).
func TestSlowBodyCheckedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "ann", auth.RoleToolManager, "ann-password-123")
	var annID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id FROM users WHERE username = 'ann'`).Scan(&annID); err != nil {
		t.Fatal(err)
	}
	tok, info, err := srv.Auth.CreateToken(ctx, audit.System, annID, auth.NewToken{Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"name":"slow-cat","description":"made after the token was revoked"}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/categories HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(srv.URL, "http://"), tok, len(body), body[:10])
	time.Sleep(500 * time.Millisecond) // the headers are read and the token authenticated
	if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, annID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past slowBody
	fmt.Fprint(conn, body[10:])
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a body finished after its token was revoked: %d, want 401", res.StatusCode)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'slow-cat'`); n != 0 {
		t.Fatal("the revoked token's request was carried out")
	}
}
