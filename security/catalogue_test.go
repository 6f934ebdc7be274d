package security_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// proof names a test by the directory of its package (from the repository root) and
// its function name.
type proof struct{ dir, name string }

// behaviour is one checkable security behaviour and the tests that prove it.
type behaviour struct {
	what   string
	proofs []proof
	// pending says why nothing can prove it yet (the feature does not exist); empty
	// when proofs are given.
	pending string
}

// catalogue is every security behaviour Toolwarden promises that a test can check,
// with where it is checked: the suite in one place, wherever its tests live.
var catalogue = []behaviour{
	// Findings of the attack (issue #17).
	{what: "1. an API token's confirm or phrase approves nothing, in the test panel either", proofs: []proof{
		{"security", "TestFinding01TokenApprovesNothingInTheTestPanel"}, {"services/router", "TestConsent"}, {"security", "TestRouteWalk"}}},
	{what: "2. a HIGH plan needs a different approver whenever another person could approve; self-approvals marked", proofs: []proof{
		{"security", "TestFinding02SeparationOfDuties"}, {"services/executions", "TestSeparationOfDuties"}, {"services/executions", "TestSeparationAlone"}}},
	{what: "3. the approval is bound to what runs: arguments, tools, the server's connection settings", proofs: []proof{
		{"security", "TestFinding03ApprovalBoundToWhatRuns"}, {"security", "TestFinding03MoreWays"}, {"services/executions", "TestStaleAtConfirm"},
		{"services/executions", "TestStaleAtRun"}, {"services/mcpclient", "TestCallToolBound"}, {"services/secrets", "TestMAC"}}},
	{what: "4. a disabled, demoted or revoked requester's plans do not run", proofs: []proof{{"security", "TestFinding04RequesterChecked"}}},
	{what: "5. only administrators mark a server trusted", proofs: []proof{{"security", "TestFinding05OnlyAdminsTrust"}}},
	{what: "6. a token cannot roll back", proofs: []proof{{"security", "TestFinding06TokenCannotRollBack"}, {"security", "TestRouteWalk"}}},
	{what: "7. failed sign-ins slow the guesser's address, never lock the owner out; X-Forwarded-For only from trusted proxies", proofs: []proof{
		{"security", "TestFinding07NoLockout"}, {"services/auth", "TestThrottlePerAccount"}, {"services/auth", "TestThrottlePerAddress"},
		{"services/auth", "TestThrottleIPv6Network"},
		{"services/auth", "TestThrottleConcurrent"}, {"cmd/toolwarden", "TestParseProxies"}}},
	{what: "8. NUL bytes, invalid UTF-8 and lone surrogates are 400 naming the field", proofs: []proof{
		{"security", "TestFinding08BadText"}, {"internal/textcheck", "TestJSON"}, {"internal/textcheck", "FuzzJSON"}, {"security", "TestRouteWalk"}}},
	{what: "9. every refused request is audited as denied, rate-limited", proofs: []proof{{"security", "TestFinding09DeniedAudited"}, {"security", "TestRouteWalk"}}},
	{what: "10. configured secret values are masked in results, events and logs", proofs: []proof{
		{"security", "TestFinding10SecretsMasked"}, {"services/secrets", "TestMasker"}, {"services/router", "TestMasks"},
		{"services/mcpclient", "TestStderrRedacted"}}},
	{what: "11. every upstream message is size-capped while read; result_too_large; the session stays usable", proofs: []proof{
		{"services/router", "TestResultTooLarge"}, {"services/mcpclient", "TestReadersHoldAtMostTheCap"}, {"services/mcpclient", "TestFrameReader"},
		{"services/mcpclient", "TestEventReader"}, {"services/mcpclient", "TestJSONBody"}, {"cmd/toolwarden", "TestParseSize"}}},
	{what: "12. stdio servers cannot reach the data dir, the secret key or the database; reference servers work confined", proofs: []proof{
		{"services/mcpclient", "TestConfinedServerAttack"}, {"services/mcpclient", "TestReferenceServersConfined"},
		{"internal/confine", "TestRoot"}, {"internal/confine", "TestUnprivileged"}, {"web", "TestServerPageConfinement"}}},
	{what: "12b. built-in terminals reach their own conversation's workspace and nothing of Toolwarden's: not the data dir, the key, the database's socket, other workspaces or Toolwarden's processes", proofs: []proof{
		{"services/builtin", "TestTerminalsConfined"}, {"internal/confine", "TestShowing"}}},

	// The checkable behaviours the issue lists.
	{what: "param binding: an approval is for the plan hash the person saw", proofs: []proof{
		{"web", "TestExecutionsAPI"}, {"security", "TestFinding03ApprovalBoundToWhatRuns"}}},
	{what: "50 concurrent decisions: exactly one wins", proofs: []proof{{"services/executions", "TestConcurrentDecisions"}}},
	{what: "grant replay", pending: "grants arrive with the built-in tools (issue #20); their replay test comes with them"},
	{what: "expiry of approvals", proofs: []proof{{"services/executions", "TestExpiry"}}},
	{what: "phrase variants (case, spaces, partial) do not approve", proofs: []proof{
		{"services/executions", "TestPhrase"}, {"services/executions", "TestPlanPhrase"}, {"e2e", "TestBrowserExecutionFlow"}, {"web", "TestExecutionPagesDangerZone"}}},
	{what: "separation of duties", proofs: []proof{{"services/executions", "TestSeparationOfDuties"}, {"services/executions", "TestSeparationAlone"},
		{"services/decide", "TestCheck"}}},
	{what: "untrusted annotations never lower risk", proofs: []proof{{"services/risk", "TestDecide"}, {"security", "TestFinding05OnlyAdminsTrust"}}},
	{what: "rug pull: a changed tool definition is a new version and stale for approved plans", proofs: []proof{
		{"services/registry", "TestApplyDiscoveryDefinitionChanges"}, {"services/router", "TestPrepareAndPin"}, {"services/executions", "TestStaleAtRun"}}},
	{what: "stale plan", proofs: []proof{{"services/executions", "TestStaleAtConfirm"}, {"services/executions", "TestStaleAtRun"}}},
	{what: "state machines: only legal transitions, under random concurrent use", proofs: []proof{
		{"services/executions", "TestLegal"}, {"services/executions", "TestServiceRefusesIllegal"}, {"services/executions", "TestRandomizedInvariant"},
		{"services/toolstate", "TestEveryTransition"}}},
	{what: "crash mid-execution: the running step is interrupted, never run twice", proofs: []proof{
		{"services/executions", "TestRunnerCrash"}, {"services/executions", "TestRestartBetweenSteps"}}},
	{what: "rollback gated by its own risk", proofs: []proof{
		{"services/executions", "TestRollback"}, {"web", "TestExecutionPagesFailureAndRollback"}, {"e2e", "TestBrowserExecutionRollback"},
		{"security", "TestFinding06TokenCannotRollBack"}}},
	{what: "denial semantics: refused calls run nothing and say why", proofs: []proof{
		{"services/router", "TestRiskNeedsApproval"}, {"security", "TestFinding09DeniedAudited"}}},
	{what: "websocket: origin, authentication, topics by permission (no IDOR)", proofs: []proof{
		{"e2e", "TestWebsocketRefusesForeignOrigin"}, {"e2e", "TestWebsocketRefusesUnauthenticated"}, {"e2e", "TestWebsocketFiltersTopicsByPermission"},
		{"e2e", "TestWebsocketDemotionStopsAudit"}, {"web", "TestTestPanelRunTopicOwner"}}},
	{what: "CSRF: cross-origin state changes refused", proofs: []proof{{"web", "TestCrossOriginPostRefused"}}},
	{what: "sessions: rotate on sign-in, end on sign-out or disable, not stored in clear", proofs: []proof{
		{"services/auth", "TestLoginRotatesSession"}, {"services/auth", "TestSessionTokenNotStored"}, {"services/auth", "TestDisabledUserCutOff"},
		{"web", "TestLoginLogoutAndRotation"}}},
	{what: "login abuse", proofs: []proof{{"services/auth", "TestThrottleConcurrent"}, {"security", "TestFinding07NoLockout"}, {"web", "TestLoginThrottled"}}},
	{what: "headers, CSP nonces, no inline handlers, untrusted text escaped", proofs: []proof{
		{"web", "TestCSPNonceAndNoInlineHandlers"}, {"web", "TestToolPageEscapesUntrustedText"}}},
	{what: "fail-closed audit: no audit row, no action", proofs: []proof{{"services/audit", "TestFailedAuditAbortsTheAction"}}},
	{what: "tamper evidence: the chain finds edits; rows cannot be updated or deleted", proofs: []proof{
		{"services/audit", "TestVerifyFindsTampering"}, {"services/audit", "TestUpdateDeleteTruncateRefused"}}},
	{what: "a database superuser's tampering shows: verify names the first broken entry, every other one and every gap; a signed checkpoint catches deleting the newest entries, emptying the table and recomputing the chain", proofs: []proof{
		{"services/audit", "TestTamperingAsSuperuser"}, {"services/audit", "TestVerifyReportsEveryProblem"},
		{"services/audit", "TestCheckpointSignature"}, {"cmd/toolwarden", "TestAuditCheckpointCommands"}}},
	{what: "the application's database role cannot UPDATE, DELETE or TRUNCATE the append-only tables, nor disable their triggers; the App works as it", proofs: []proof{
		{"app", "TestAppRole"}}},
	{what: "durability: MEDIUM and HIGH calls' records and audited refusals commit synchronously, LOW calls' may commit asynchronously; the chain holds across both", proofs: []proof{
		{"services/router", "TestCommitClasses"}, {"services/db", "TestSetCommit"}, {"services/audit", "TestAppender"},
		{"services/router", "TestConcurrentCallsKeepTheAuditChain"}}},
	{what: "roles: every route as every role, token and nobody", proofs: []proof{
		{"security", "TestRouteWalk"}, {"web", "TestRouteTablePermissions"}, {"services/auth", "TestRolePermissions"}}},
	{what: "canary sweep: a secret value appears in no page, log, event or row", proofs: []proof{
		{"e2e", "TestSecretsNeverLeave"}, {"security", "TestFinding10SecretsMasked"}}},
	{what: "key rotation", proofs: []proof{{"services/secrets", "TestRotation"}, {"services/registry", "TestKeyRotation"}, {"e2e", "TestSecretsSurviveKeyRotation"}}},
	{what: "the MCP endpoints (/mcp, /sse, /messages/): API tokens only (no session cookies), 401 with WWW-Authenticate, a revoked token fails the next request", proofs: []proof{
		{"services/gateway", "TestGatewayAuthentication"}, {"services/gateway", "TestSSEAuthentication"}, {"services/gateway", "TestSSEToolsThroughGateway"},
		{"security", "TestRouteWalk"}}},
	{what: "the MCP endpoint: a MEDIUM or HIGH call waits for a person's decision in the browser (tokens never approve) and returns the real result or the reason; another user cannot await or list it; an agent cannot queue more than its share", proofs: []proof{
		{"services/gateway", "TestApprovalInsideTheCall"}, {"services/gateway", "TestPendingAndAwait"}, {"e2e", "TestBrowserApprovalInsideMCPCall"}}},
	{what: "the MCP endpoint: a requestState is signed, bound to its user, execution, tool and arguments, expires, and works once", proofs: []proof{
		{"services/gateway", "TestInputRequiredRetry"}}},
	{what: "the MCP endpoint: the caller's API token never reaches an upstream server", proofs: []proof{
		{"services/gateway", "TestTokenNotForwarded"}}},
	{what: "the legacy SSE transport: a session takes messages only with the API token that opened it", proofs: []proof{
		{"services/gateway", "TestSSEAuthentication"}}},
	{what: "the MCP endpoints: a token's user sees and calls only the tools they may use, every call through the router", proofs: []proof{
		{"services/gateway", "TestToolsThroughGateway"}, {"services/gateway", "TestSSEToolsThroughGateway"}}},
	{what: "the MCP endpoint: upstream resources and prompts reach only users who may use one of the server's tools; every read and get is audited (denials too), within the caller's call rate, with the server's secrets masked", proofs: []proof{
		{"services/gateway", "TestResourcesAndPromptsThroughGateway"}, {"services/gateway", "TestPassthroughRate"}, {"services/gateway", "TestPassthroughMasksSecrets"}}},
	{what: "no token passthrough to upstream servers", proofs: []proof{{"security", "TestNoTokenPassthrough"}}},
	{what: "template tools: arguments stay data where they land (argv without a shell, never an option; URL path and query escaped, origin fixed; JSON bodies encoded; no line breaks in headers)", proofs: []proof{
		{"services/template", "TestCommandArgumentsStayData"}, {"services/template", "TestCommandLeadingDash"},
		{"services/template", "TestHTTPArgumentsStayData"}, {"services/template", "TestHTTPRedirectStaysAtOrigin"},
		{"services/template", "TestPerlTwoArgOpenRefused"}, {"services/template", "TestPathValueCannotClimbOut"},
		{"services/template", "TestCookieValueCannotAddCookies"},
		{"services/template", "TestParseProblems"}, {"web", "TestTemplateServerAPI"}}},
	{what: "template tools: commands run confined, time out and die with their process group; output is capped", proofs: []proof{
		{"services/mcpclient", "TestTemplateCommandsConfined"}, {"services/mcpclient", "TestTemplateSessionEndKillsCommands"},
		{"services/template", "TestCommandTimeoutKillsGroup"}, {"services/template", "TestCommandExitKillsLeftovers"},
		{"services/template", "TestOutputCap"}}},
	{what: "template tools: a credential written into a template (a header, the URL, a body, a command, an input_schema value) is refused when it is saved", proofs: []proof{
		{"services/registry", "TestTemplateServerValidation"}, {"services/registry", "TestTemplateSchemaSecretRefused"}}},
	{what: "template tools that run commands: only administrators set them", proofs: []proof{
		{"services/registry", "TestTemplateServerCommandPermission"}, {"web", "TestTemplateServerPermissions"}}},
	// Issue #21: access and deployment defaults.
	{what: "a person changes their own password (session only, the current one required, the rules of user creation); other sessions end; audited", proofs: []proof{
		{"web", "TestChangeOwnPassword"}, {"web", "TestChangeOwnPasswordPage"}, {"e2e", "TestBrowserChangeOwnPassword"}, {"security", "TestRouteWalk"}}},
	{what: "/metrics needs metrics.view (administrators, auditors): an API token or a session; 401 without", proofs: []proof{
		{"web", "TestMetricsNeedsAToken"}, {"services/auth", "TestRolePermissions"}}},
	{what: "cookies Secure and HSTS whenever the request came over TLS, directly or through a trusted proxy", proofs: []proof{
		{"web", "TestSecureCookiesAndHSTSOverTLS"}}},
	{what: "API tokens expire by default and their owners are warned the week before", proofs: []proof{
		{"web", "TestTokenDefaultExpiryAndWarning"}, {"cmd/toolwarden", "TestTokenDefaultTTL"}}},
	{what: "a JSON key given twice in one object is refused naming it, in every body, plan and arguments", proofs: []proof{
		{"web", "TestDuplicateJSONKeysRefused"}, {"internal/textcheck", "TestDuplicateKey"}, {"internal/textcheck", "FuzzDuplicateKey"}}},
	{what: "egress policy for server URLs: metadata endpoints denied by default, allow/deny lists, checked on the resolved address", proofs: []proof{
		{"internal/egress", "TestCheckURL"}, {"internal/egress", "TestDialChecksResolvedAddress"}, {"web", "TestEgressMetadataDeniedByDefault"},
		{"web", "TestEgressDenyAtDialTime"}, {"web", "TestEgressTemplateHTTP"}, {"internal/egress", "TestProxiedRequestChecksTheTarget"},
		{"internal/egress", "TestNAT64LocalUsePrefix"}, {"services/mcpclient", "TestEgressThroughEnvironmentProxy"},
		{"internal/egress", "TestNumericHostsRefused"}, {"internal/egress", "TestNumericHostsRefusedBeforeTheProxy"},
		{"internal/egress", "TestTransportUsesTheGivenProxy"}, {"cmd/toolwarden", "TestEgressPolicyTakesTheEnvironmentsProxy"}}},
	{what: "secrets rotate re-encrypts every secret, old keys decrypt until retired, retiring refused while needed, a copied ciphertext does not decrypt", proofs: []proof{
		{"cmd/toolwarden", "TestSecretsRotateAndRetire"}, {"services/tools", "TestRotateToolSecrets"}, {"services/secrets", "TestRotation"},
		{"services/registry", "TestCiphertextBoundToRow"}}},
	{what: "canary: server and tool secrets appear in no page, API answer, websocket frame, export, audit row, event or log line", proofs: []proof{
		{"web", "TestCanaryNeverLeaves"}, {"e2e", "TestSecretsNeverLeave"}}},
	{what: "what other people read of a call or a step (Logs tab, step results) has credentials masked, in values and in an object's keys", proofs: []proof{
		{"services/usage", "TestRedactMasksSecretKeys"}}},
	{what: "a plan a language model wrote is seen by a person before it runs (never approved by policy, a token's waits for a person); the model's words are cut and shown as its own", proofs: []proof{
		{"services/executions", "TestModelPlanWaitsForAPerson"}, {"services/planner", "TestLLMModelWordsBounded"}, {"web", "TestPlannerLeavesOutFixedParameters"}}},
	{what: "a call to a tool its caller may not use is refused and audited as forbidden whatever its arguments", proofs: []proof{
		{"services/router", "TestBadArgumentsToAForbiddenToolAreForbidden"}, {"services/router", "TestPermissions"}}},
	{what: "fuzzed input: plan JSON, tool arguments against schemas, form decoding", proofs: []proof{
		{"handlers", "FuzzPlanText"}, {"services/schema", "FuzzValidateArguments"}, {"views/form", "FuzzDecodeForm"}, {"services/planner", "FuzzRules"}}},
}

var findingRe = regexp.MustCompile(`^\d+\. `)

// The catalogue names only tests that exist: a renamed or deleted test fails here, so
// the list cannot quietly stop being true.
func TestCatalogue(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]map[string]bool{} // dir → test names
	find := func(dir string) map[string]bool {
		if m, ok := funcs[dir]; ok {
			return m
		}
		m := map[string]bool{}
		files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
		re := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, mm := range re.FindAllSubmatch(src, -1) {
				m[string(mm[1])] = true
			}
		}
		funcs[dir] = m
		return m
	}
	findings := 0
	for _, b := range catalogue {
		if findingRe.MatchString(b.what) {
			findings++
		}
		switch {
		case len(b.proofs) == 0 && b.pending == "":
			t.Errorf("%q: no test proves it, and nothing says why", b.what)
		case len(b.proofs) > 0 && b.pending != "":
			t.Errorf("%q: has tests and a pending reason", b.what)
		}
		for _, p := range b.proofs {
			if !find(p.dir)[p.name] {
				t.Errorf("%q: no %s in %s", b.what, p.name, p.dir)
			}
		}
	}
	if findings != 12 {
		t.Errorf("the catalogue lists %d findings of issue #17, want all 12", findings)
	}
}
