package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) {
	mcptest.Main() // stdio MCP servers in these tests are this binary, re-executed
	dbtest.Main(m)
}

const password = "a-password-for-tests"

// person is a user with a browser session and an API token.
type person struct {
	name    string
	role    auth.Role
	id      string
	session webtest.API // signed in with a session cookie
	token   webtest.API // the same user through an API token
}

// env is a server with one person per role ("admin" is the bootstrap administrator).
type env struct {
	t      *testing.T
	srv    *webtest.Server
	people map[auth.Role]*person
}

func start(t *testing.T, opts *webtest.Options) *env {
	t.Helper()
	e := &env{t: t, srv: webtest.Start(t, opts), people: map[auth.Role]*person{}}
	for _, r := range auth.Roles {
		name := "p-" + strings.ReplaceAll(string(r), "_", "-")
		pw := password
		if r == auth.RoleAdmin {
			name, pw = "admin", webtest.AdminPassword
		} else {
			e.srv.CreateUser(t, name, r, pw)
		}
		e.people[r] = e.login(name, pw, r)
	}
	return e
}

// login signs name in and gives them a token too.
func (e *env) login(name, pw string, r auth.Role) *person {
	e.t.Helper()
	u, err := e.srv.Auth.GetUserByName(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return &person{name: name, role: r, id: u.ID,
		session: webtest.API{T: e.t, Srv: e.srv, C: e.srv.Login(e.t, name, pw)},
		token:   webtest.API{T: e.t, Srv: e.srv, Bearer: e.srv.Token(e.t, name)}}
}

// user adds a user with a role, signed in.
func (e *env) user(name string, r auth.Role) *person {
	e.t.Helper()
	e.srv.CreateUser(e.t, name, r, password)
	return e.login(name, password, r)
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	return testkit.Count(e.t, e.srv.Pool, q, args...)
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.srv.Pool.Exec(context.Background(), q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// running creates a plan of a slow first step and then steps, has admin approve it,
// and returns once its first step runs.
func (e *env) running(requester, admin webtest.API, later ...map[string]any) execution {
	e.t.Helper()
	ex := create(e.t, requester, plan(append([]map[string]any{step("mt__sleep", map[string]any{"ms": 1500})}, later...)...))
	admin.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 200, nil)
	waitFor(e.t, 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM tool_calls WHERE execution_id = $1 AND position = 0 AND status = 'running'`, ex.ID) == 1
	}, "the first step never ran")
	return ex
}

// flush waits until the router wrote what its calls recorded (usage, events).
func (e *env) flush() {
	e.t.Helper()
	if err := e.srv.Router.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

var waitFor = webtest.WaitFor

// apiErr is the API's error shape.
type apiErr struct {
	Error struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

// expect sends a request and checks the status and error code ("" for success).
func expect(t *testing.T, a webtest.API, method, path string, body any, status int, code string) apiErr {
	t.Helper()
	got, raw := a.Do(method, path, body)
	var e apiErr
	_ = json.Unmarshal(raw, &e)
	if got != status || e.Error.Code != code {
		t.Fatalf("%s %s: got %d %s, want %d %s", method, path, got, raw, status, code)
	}
	return e
}

// execution is the API's view of an execution.
type execution struct {
	ID                 string `json:"id"`
	Status             string `json:"status"`
	Risk               string `json:"risk"`
	ConfirmationPhrase string `json:"confirmation_phrase"`
	PlanHash           string `json:"plan_hash"`
	Error              string `json:"error"`
	Reason             string `json:"reason"`
	SelfApproved       bool   `json:"self_approved"`
	Steps              []struct {
		Tool   string          `json:"tool"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	} `json:"steps"`
}

func plan(steps ...map[string]any) map[string]any {
	return map[string]any{"plan": map[string]any{"steps": steps}}
}

func step(tool string, args map[string]any) map[string]any {
	return map[string]any{"tool": tool, "arguments": args}
}

// create submits a plan as a and returns the execution.
func create(t *testing.T, a webtest.API, body map[string]any) execution {
	t.Helper()
	var ex execution
	a.JSON(http.MethodPost, "/api/v1/executions", body, http.StatusCreated, &ex)
	return ex
}

// waitStatus polls execution id until it is in want.
func waitStatus(t *testing.T, a webtest.API, id, want string) execution {
	t.Helper()
	var ex execution
	waitFor(t, 30*time.Second, func() bool {
		a.JSON(http.MethodGet, "/api/v1/executions/"+id, nil, http.StatusOK, &ex)
		return ex.Status == want
	}, fmt.Sprintf("execution %s never became %s", id, want))
	return ex
}
