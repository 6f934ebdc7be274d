package events_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/events"
)

// payloadSamples are payloads of every kind as the producers write them (their JSON is
// stored in the events table, so it must not change): each must decode into the kind's
// payload type with no key left over, and encode back to the same JSON.
var payloadSamples = map[string][]string{
	"session.started": {`{"user_id":"u1","username":"alice"}`},
	"session.ended":   {`{"user_id":"u1","username":"alice","reason":"signed out"}`},
	"user.changed":    {`{"user_id":"u1","username":"alice","reason":"account changed"}`},
	"token.revoked":   {`{"user_id":"u1","username":"","reason":"API token revoked"}`},
	"audit.appended": {`{"id":7,"at":"2025-01-02T03:04:05Z","actor_kind":"user","actor_name":"alice","action":"tool.call",
		"target_type":"tool","target_id":"t1","target_name":"fs__read","result":"success"}`,
		`{"id":8,"at":"2025-01-02T03:04:05Z","actor_kind":"system","actor_name":"system","action":"execution.expire",
		"target_type":"execution","target_id":"e1","result":"success"}`},
	"server.status":    {`{"id":"s1","name":"fs","status":"error","previous":"connected","enabled":true,"tool_count":3,"last_error":"EOF"}`},
	"server.changed":   {`{"id":"s1","name":"fs","status":"connected","enabled":false,"tool_count":0}`},
	"server.deleted":   {`{"id":"s1","name":"fs"}`},
	"server.reconnect": {`{"id":"s1","name":"fs","replica":"r1"}`, `{"id":"s1","name":"fs"}`},
	"discovery.completed": {`{"server_id":"s1","server":"fs","trigger":"manual","run_id":4,"added":1,"updated":2,
		"unchanged":3,"removed":0,"total":6}`},
	"tools.changed": {`{"server_id":"s1","server":"fs","trigger":"connect","run_id":4,"added":1,"updated":0,
		"unchanged":0,"removed":0,"total":1}`},
	"discovery.failed":   {`{"server_id":"s1","server":"fs","trigger":"connect","run_id":5,"error":"boom"}`},
	"discovery.progress": {`{"server_id":"s1","trigger":"manual","pages":2,"tools":150}`},
	"tool.changed":       {`{"id":"t1","version":3}`},
	"tool.permission":    {`{"tool_id":"t1","user_id":"u1"}`},
	"category.changed":   {`{"id":"c1","name":"weather"}`, `{"id":"c1","name":"weather","deleted":true}`},
	"tool.state":         {`{"count":1,"changes":[{"id":"t1","from":"discovered","to":"validated"}]}`, `{"count":101}`},
	"tool.started": {`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"api","actor":"alice","risk":"low",
		"conversation_id":"conv","runtime":{"state":"executing","active":1,"since":"2025-01-02T03:04:05Z"}}`},
	"tool.output": {`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"test_panel","actor":"alice","risk":"high",
		"progress":{"progress":1,"total":4,"message":"reading"}}`,
		`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"api","actor":"alice","risk":"low","progress":{"progress":0.5}}`},
	"tool.failed": {`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"api","actor":"alice","risk":"low",
		"code":"upstream_error","message":"boom","duration_ms":1.5,
		"runtime":{"state":"error","active":0,"since":"2025-01-02T03:04:05Z","last_error":"boom","duration_ms":1.5}}`},
	"tool.completed": {`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"execution","actor":"alice","risk":"medium",
		"is_error":false,"duration_ms":2.5,"attempts":1,"summary":"hi",
		"runtime":{"state":"completed","active":0,"since":"2025-01-02T03:04:05Z","duration_ms":2.5}}`,
		`{"call_id":"c1","tool_id":"t1","tool":"fs__read","source":"api","actor":"alice","risk":"low",
		"is_error":true,"duration_ms":0,"attempts":2,"runtime":{"state":"error","active":0,"since":"2025-01-02T03:04:05Z"}}`},
	"run.ended": {`{"call_id":"c1","tool_id":"t1"}`},
	"plan.created": {`{"execution_id":"e1","status":"awaiting_approval","risk":"medium","title":"Read a file",
		"requester":"alice","plan_hash":"ab12","from":["planning"],"steps":2,"rollback":1,"risk_why":"step 1 is medium risk"}`},
	"approval.requested": {`{"execution_id":"e1","status":"awaiting_approval","risk":"high","title":"Read a file",
		"requester":"alice","plan_hash":"ab12","from":["planning"],"steps":1,"rollback":0,"risk_why":"step 1 is high risk"}`},
	"approval.granted": {`{"execution_id":"e1","status":"executing","risk":"high","title":"Read a file","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval"],"approval":"phrase","approver":"bob"}`,
		`{"execution_id":"e1","status":"executing","risk":"high","title":"Read a file","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval"],"approval":"confirmed","approver":"alice","self_approved":true}`},
	"approval.rejected": {`{"execution_id":"e1","status":"cancelled","risk":"high","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval"],"reason":"not now","by":"bob"}`},
	"execution.cancelled": {`{"execution_id":"e1","status":"cancelled","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval","executing"],"reason":"","by":"alice"}`,
		`{"execution_id":"e1","status":"cancelled","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval"],"reason":"the tool fs__read changed since the plan was made"}`},
	"execution.expired": {`{"execution_id":"e1","status":"expired","risk":"medium","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["awaiting_approval"]}`},
	"execution.success": {`{"execution_id":"e1","status":"success","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["executing"],
		"results":[{"position":0,"tool":"fs__read","status":"completed","duration_ms":1.5,"error":""}]}`},
	"execution.failed": {`{"execution_id":"e1","status":"failed","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["executing"],"error":"step 2 failed",
		"results":[{"position":0,"tool":"fs__read","status":"completed","duration_ms":1.5,"error":""},
		           {"position":1,"tool":"fs__write","status":"failed","duration_ms":null,"error":"denied"}]}`,
		`{"execution_id":"e1","status":"failed","risk":"low","title":"t","requester":"alice","plan_hash":"ab12",
		"from":["executing"],"error":"interrupted: Toolwarden stopped while step 1 ran","step":0}`},
	"rollback.started": {`{"execution_id":"e1","status":"rolling_back","risk":"medium","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["failed"],"steps":1,"not_undone":null}`,
		`{"execution_id":"e1","status":"rolling_back","risk":"high","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["failed"],"steps":1,"not_undone":["step 2 (fs__write)"],"self_approved":true}`},
	"rollback.completed": {`{"execution_id":"e1","status":"rolled_back","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["rolling_back"],
		"results":[{"position":0,"tool":"fs__delete","status":"completed","duration_ms":0.25,"error":""}]}`},
	"rollback.failed": {`{"execution_id":"e1","status":"rollback_failed","risk":"low","title":"t","requester":"alice",
		"plan_hash":"ab12","from":["rolling_back"],"error":"undo failed",
		"results":[{"position":0,"tool":"fs__delete","status":"failed","duration_ms":0.25,"error":"undo failed"}]}`},
	"grant.created": {`{"id":"g1","conversation_id":"conv-1","operation":"file_operations.create_file","target":"/etc/x"}`},
	"grant.revoked": {`{"id":"g1","conversation_id":"conv-1","operation":"file_operations"}`},
	"grant.used":    {`{"id":"g1","conversation_id":"conv-1","operation":"file_operations.create_file","target":"/etc/x"}`},
	"terminal.opened": {`{"id":"pty-1","kind":"pty","conversation_id":"conv-1","owner_id":"u1","owner_name":"alice",
		"dir":"/w/conv-1","started":"2025-01-02T03:04:05Z","cols":80,"rows":24}`},
	"terminal.exited": {`{"id":"cmd-1","kind":"command","conversation_id":"conv-1","dir":"/w/conv-1","command":"make",
		"started":"2025-01-02T03:04:05Z","exited":true}`},
	"terminal.closed": {`{"id":"cmd-1","kind":"command","conversation_id":"conv-1","dir":"/w/conv-1","command":"make",
		"started":"2025-01-02T03:04:05Z","exited":true}`},
	"collaboration.requested": {`{"id":"c1","user_id":"u1","conversation_id":"conv-1","prompt":"May I?",
		"authorize_operation":"file_operations.create_file","target":"/etc/x","status":"pending"}`},
	"collaboration.ended": {`{"id":"c1","user_id":"u1","conversation_id":"conv-1","prompt":"May I?","status":"answered",
		"response":"yes"}`},
}

// TestCatalogPayloads decodes the samples of every kind into its payload type: no key
// unknown to the type, and the type encodes them back to the same JSON (no key added or
// dropped, no value changed).
func TestCatalogPayloads(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range events.Catalog() {
		if seen[k.Kind] {
			t.Errorf("%s is in the catalogue twice", k.Kind)
		}
		seen[k.Kind] = true
		samples := payloadSamples[k.Kind]
		if len(samples) == 0 {
			t.Errorf("%s: no sample payload; add one as its producer writes it", k.Kind)
		}
		for _, sample := range samples {
			p := reflect.New(k.Payload)
			dec := json.NewDecoder(strings.NewReader(sample))
			dec.DisallowUnknownFields()
			if err := dec.Decode(p.Interface()); err != nil {
				t.Errorf("%s: decode %s into %s: %v", k.Kind, sample, k.Payload, err)
				continue
			}
			back, err := json.Marshal(p.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal([]byte(sample), &want); err != nil {
				t.Fatalf("%s: sample %s: %v", k.Kind, sample, err)
			}
			_ = json.Unmarshal(back, &got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s encodes as\n%s, want\n%s", k.Kind, k.Payload, back, compact(sample))
			}
		}
	}
	for kind := range payloadSamples {
		if !seen[kind] {
			t.Errorf("sample of %s, which is not in the catalogue", kind)
		}
	}
}

func compact(s string) string {
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(s))
	return b.String()
}

// TestKindDecode: a kind decodes its own events and refuses another kind's.
func TestKindDecode(t *testing.T) {
	ev := events.Event{Kind: "server.deleted", Payload: json.RawMessage(`{"id":"s1","name":"fs"}`)}
	if p, err := events.ServerDeleted.Decode(ev); err != nil || p != (events.ServerRef{ID: "s1", Name: "fs"}) {
		t.Errorf("got %+v, %v; want the server", p, err)
	}
	if !events.ServerDeleted.Is(ev) || events.ServerChanged.Is(ev) {
		t.Error("Is does not tell the kinds apart")
	}
	if _, err := events.ServerChanged.Decode(ev); err == nil {
		t.Error("decoded a server.deleted event as server.changed")
	}
}

// TestCatalogListsEveryKind: every Kind constant declared in catalog.go is in Catalog().
func TestCatalogListsEveryKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "catalog.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		if ix, ok := vs.Type.(*ast.IndexExpr); !ok || !isIdent(ix.X, "Kind") {
			return true
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(lit.Value)
				declared = append(declared, s)
			}
		}
		return true
	})
	if len(declared) < 30 {
		t.Fatalf("found %d kinds in catalog.go; the test no longer reads it right", len(declared))
	}
	var listed []string
	for _, k := range events.Catalog() {
		listed = append(listed, k.Kind)
	}
	for _, k := range declared {
		if !slices.Contains(listed, k) {
			t.Errorf("%s is declared but not in the catalogue (catalog)", k)
		}
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestProducersUseTheCatalogue: outside this package, events are published only through
// the catalogue's kinds (Kind.Publish, Kind.Draft), never with a kind string and a
// payload of any shape (events.Publish, an events.Draft literal).
func TestProducersUseTheCatalogue(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := filepath.Abs(".")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if isSelector(n.Fun, "events", "Publish") {
					t.Errorf("%s: events.Publish with a kind string; publish through a catalogue kind (events.X.Publish)", fset.Position(n.Pos()))
				}
			case *ast.CompositeLit:
				if isSelector(n.Type, "events", "Draft") {
					t.Errorf("%s: an events.Draft literal; use a catalogue kind's Draft (events.X.Draft)", fset.Position(n.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; the test no longer finds the module", files, root)
	}
}

func isSelector(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(s.X, pkg) && s.Sel.Name == name
}
