package secrets

import (
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// Detection decides which values of a server registration or a tool
// configuration are encrypted, masked and kept out of logs when nobody marked
// them secret. A false positive costs a masked value; a false negative leaks a
// credential, so both functions lean towards "secret" where names are ambiguous.
// Both are pure and deterministic: the same input always gets the same answer.

// secretWords are name words (after splitting, see textcheck.NameWords) that mark a secret
// when they are the last word of a name, or, for the run-together forms, the last
// two words joined ("session"+"id").
var secretWords = map[string]bool{
	"key": true, "token": true, "secret": true, "password": true,
	"passwd": true, "pwd": true, "pass": true, "passphrase": true,
	"auth": true, "authorization": true, "cookie": true,
	"credential": true, "credentials": true, "session": true, "signature": true,
	"jwt": true,
	// Run-together spellings seen in env vars and headers.
	"apikey": true, "accesstoken": true, "authtoken": true, "apitoken": true,
	"refreshtoken": true, "idtoken": true, "bearertoken": true,
	"clientsecret": true, "privatekey": true, "secretkey": true,
	"accesskey": true, "apisecret": true,
	// Session identifiers are bearer credentials too.
	"sessionid": true, "sessid": true, "jsessionid": true, "phpsessid": true,
}

// notSecretBefore lists qualifiers that make a trailing "key" or "token" a
// structural name rather than a credential ("sort_key", "next_page_token").
var notSecretBefore = map[string]map[string]bool{
	"key": {
		"public": true, "sort": true, "primary": true, "foreign": true,
		"partition": true, "cache": true, "idempotency": true, "range": true,
		"hash": true, "lookup": true, "row": true, "dedup": true,
	},
	"token": {
		"page": true, "next": true, "continuation": true, "pagination": true,
		"cursor": true, "max": true, "min": true,
	},
}

// trailingNoise are words that wrap a secret name without changing what it holds
// ("API_KEY_B64", "password_value").
var trailingNoise = map[string]bool{
	"value": true, "val": true, "b64": true, "base64": true, "raw": true,
	"str": true, "string": true, "hex": true,
}

// LooksSecretName reports whether an HTTP header, environment variable or
// parameter name usually holds a secret. The name is split into words at any
// non-alphanumeric character and at camelCase boundaries ("dbPassword" → db,
// password; "APIKey" → api, key), lower-cased, and judged by its last word, so
// "OPENAI_API_KEY", "X-Api-Key", "GITHUB_TOKEN", "Proxy-Authorization" and
// "Set-Cookie" match while "keyboard", "monkey", "tokenizer_model", "max_tokens",
// "key_id" and "token_type" do not. Trailing digits and wrapper words such as
// "_value" or "_b64" are ignored ("API_KEY_2", "PASSWORD_B64").
func LooksSecretName(name string) bool {
	words := textcheck.NameWords(name)
	for len(words) > 1 && (trailingNoise[words[len(words)-1]] || isDigits(words[len(words)-1])) {
		words = words[:len(words)-1]
	}
	if len(words) == 0 {
		return false
	}
	last := strings.TrimRight(words[len(words)-1], "0123456789")
	if last == "" {
		return false
	}
	if secretWords[last] {
		if len(words) > 1 && notSecretBefore[last][words[len(words)-2]] {
			return false
		}
		return true
	}
	if len(words) > 1 && secretWords[words[len(words)-2]+last] {
		return true
	}
	// Run together (PGPASSWORD, DBPASSWORD, MYAPIKEY): the words that name nothing
	// but a secret, as the end of the last word. "token" is not among them: a
	// NEXTPAGETOKEN or CSRFTOKEN run together cannot be told from a credential's name.
	for _, w := range runTogether {
		if len(last) > len(w) && strings.HasSuffix(last, w) {
			return true
		}
	}
	return false
}

// runTogether are the words that name a secret at the end of a longer word.
var runTogether = []string{"password", "passwd", "secret", "apikey"}

// LooksSecretField reports a field name that holds a secret whatever its value looks
// like (password, client_secret, api_key…), for the fields of request bodies: narrower
// than LooksSecretName, which also takes "key", a body's field as often as not (a Jira
// project's key).
func LooksSecretField(name string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	for _, w := range []string{"password", "passwd", "pwd", "secret", "apikey", "apitoken", "accesstoken", "refreshtoken", "authtoken",
		"sessiontoken", "bearertoken", "privatekey", "secretkey", "accesskey", "authorization", "credentials"} {
		if strings.HasSuffix(n, w) {
			return true
		}
	}
	return n == "token"
}

// LooksSecretParam reports a tool parameter whose value is a credential whatever it
// looks like (password, api_key, github_token…): LooksSecretField, or LooksSecretName
// but a bare "key" and session ids, plain values as often (a Jira project's key, a
// terminal's session). Saved test cases and template schemas keep no value of one.
func LooksSecretParam(name string) bool {
	if LooksSecretField(name) {
		return true
	}
	n := strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, name))
	return LooksSecretName(name) && n != "key" && !strings.HasSuffix(n, "sessionid")
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Token shapes published by their issuers. Each is anchored to the whole value
// (after an optional auth scheme), so prose that mentions a prefix does not match.
var secretValuePatterns = []*regexp.Regexp{
	// JWT: base64url header starting {" (eyJ), payload, and a signature that
	// is empty only for unsigned ("alg":"none") tokens.
	regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`),
	// OpenAI and Anthropic (sk-, sk-proj-, sk-ant-); Stripe secret and restricted keys.
	regexp.MustCompile(`^sk-[A-Za-z0-9_-]{20,}$`),
	regexp.MustCompile(`^[sr]k_(live|test)_[A-Za-z0-9]{16,}$`),
	// GitHub personal, OAuth, user-to-server, server-to-server and refresh tokens.
	regexp.MustCompile(`^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})$`),
	// GitLab personal access tokens.
	regexp.MustCompile(`^glpat-[A-Za-z0-9_-]{20,}$`),
	// Slack bot, user, app, refresh and session tokens.
	regexp.MustCompile(`^xox[abprs]-[A-Za-z0-9-]{10,}$`),
	// AWS access key ids, long-term (AKIA) and temporary (ASIA).
	regexp.MustCompile(`^(AKIA|ASIA)[0-9A-Z]{16}$`),
}

// pemPrivateKey matches the armour of any PEM private key (PKCS#1, PKCS#8,
// encrypted, EC, OpenSSH), wherever it appears in the value.
var pemPrivateKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)

// LooksSecretValue reports whether v has the shape of a credential:
//
//   - an Authorization value "Bearer <token of 16+ chars>", "Basic <base64>" or
//     "Token <token of 16+ chars>" (scheme case-insensitive);
//   - a JWT (three base64url parts, the first starting "eyJ");
//   - a token with a published prefix: sk-… (OpenAI, Anthropic), sk_live_/rk_live_
//     (Stripe), ghp_/gho_/ghu_/ghs_/ghr_/github_pat_ (GitHub), glpat- (GitLab),
//     xoxb-/xoxp-/xoxa-/xoxr-/xoxs- (Slack), AKIA/ASIA + 16 (AWS);
//   - a PEM block "-----BEGIN … PRIVATE KEY-----";
//   - a URL with a password in it ("postgres://user:pw@host/db");
//   - a single high-entropy word: at least 32 characters from the base64,
//     base64url and token alphabets (letters, digits, - _ . ~ + / =); at least
//     three of the classes lower case, upper case, digit and symbol; the class
//     changing between at least 30% of adjacent characters (50% for values that
//     start with /, ./ or ~/), not counting pairs with a "/" (random text
//     alternates, words and path segments do not); and a Shannon entropy of at
//     least 4.0 bits per character. Random base64 of 24 or more bytes passes (all
//     but about 1 in 400 at 24 bytes, 1 in 2,500 at 32); hex digests, UUIDs,
//     paths and identifiers do not.
func LooksSecretValue(v string) bool {
	return looksSecretValue(v, 0)
}

// maxURLNesting is how many URLs deep LooksSecretValue looks: a URL, and a URL in one of
// its query values or path segments ("?next=https://…?api_key=…"). Following every
// nested "://" would parse the rest of the text once per level, quadratic in its length.
const maxURLNesting = 2

// looksSecretValue is LooksSecretValue for a value inside depth URLs.
func looksSecretValue(v string, depth int) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	if pemPrivateKey.MatchString(v) {
		return true
	}
	if scheme, cred, ok := strings.Cut(v, " "); ok {
		cred = strings.TrimSpace(cred)
		switch strings.ToLower(scheme) {
		case "bearer", "token":
			return len(cred) >= 16 && !strings.ContainsAny(cred, " \t\r\n")
		case "basic":
			return len(cred) >= 8 && isBase64Text(cred)
		}
		return false
	}
	for _, re := range secretValuePatterns {
		if re.MatchString(v) {
			return true
		}
	}
	if strings.Contains(v, "://") {
		// Past the bound the URL is not parsed; highEntropy refuses a ':' anyway.
		return depth < maxURLNesting && secretURL(v, depth+1)
	}
	return highEntropy(v)
}

// secretURL reports a URL that carries a credential: a password, a user shaped like a
// token, a query value named
// like one or shaped like one (?access_token=…, ?key=…), a path segment shaped like one,
// or a webhook URL, whose path is the credential. depth counts v among the URLs it is in.
func secretURL(v string, depth int) bool {
	if onSecretURL != nil {
		onSecretURL()
	}
	u, err := url.Parse(v)
	if err != nil {
		return false
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			return true
		}
		// A token as the user (https://ghp_…@github.com/…, as git and npm take it).
		if n := u.User.Username(); n != "" && looksSecretValue(n, depth) {
			return true
		}
	}
	if webhookURL.MatchString(v) {
		return true
	}
	for k, vals := range u.Query() {
		for _, q := range vals {
			if q != "" && (LooksSecretName(k) || looksSecretValue(q, depth)) {
				return true
			}
		}
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg != "" && looksSecretValue(seg, depth) {
			return true
		}
	}
	return false
}

// onSecretURL, when set by a test, is called on each secretURL call.
var onSecretURL func()

// webhookURL matches the incoming-webhook URLs of Slack, Discord and Microsoft Teams,
// which are their own credential.
var webhookURL = regexp.MustCompile(`^https://(hooks\.slack\.com/(services|workflows|triggers)/|(discord|discordapp)\.com/api/webhooks/|[a-z0-9-]+\.webhook\.office\.com/)`)

// HoldsSecret reports whether a decoded JSON value carries a credential anywhere: a
// string LooksSecretValue accepts, or an object key LooksSecretName accepts
// ({"Authorization": ...}).
func HoldsSecret(v any) bool {
	switch x := v.(type) {
	case string:
		return LooksSecretValue(x)
	case []any:
		return slices.ContainsFunc(x, HoldsSecret)
	case map[string]any:
		for k, e := range x {
			if LooksSecretName(k) || HoldsSecret(e) {
				return true
			}
		}
	}
	return false
}

// highEntropy is the fallback for tokens of unknown issuers; see LooksSecretValue.
func highEntropy(v string) bool {
	if len(v) < 32 {
		return false
	}
	var lower, upper, digit, symbol bool
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		case strings.IndexByte("-_.~+/=", c) >= 0:
			symbol = true
		default:
			return false
		}
	}
	classes := 0
	for _, b := range []bool{lower, upper, digit, symbol} {
		if b {
			classes++
		}
	}
	// A value that starts like a path must alternate more: short path segments
	// with digits and capitals ("/home/u2/App3/v1") reach 30%, random text
	// rarely drops to 50%.
	minSwitches := 0.3
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "~/") {
		minSwitches = 0.5
	}
	return classes >= 3 && classSwitches(v) >= minSwitches && shannonEntropy(v) >= 4.0
}

// classSwitches is the share of adjacent character pairs whose classes differ,
// leaving out pairs with a "/" so that a path's separators do not count. Random
// text switches between lower case, upper case, digits and symbols at most pairs
// (about 64% for base64); names made of words, even long dotted, camelCase or
// slash-separated ones whose character mix and entropy pass, switch rarely.
func classSwitches(s string) float64 {
	class := func(c byte) int {
		switch {
		case c >= 'a' && c <= 'z':
			return 0
		case c >= 'A' && c <= 'Z':
			return 1
		case c >= '0' && c <= '9':
			return 2
		}
		return 3
	}
	pairs, switches := 0, 0
	for i := 1; i < len(s); i++ {
		if s[i] == '/' || s[i-1] == '/' {
			continue
		}
		pairs++
		if class(s[i]) != class(s[i-1]) {
			switches++
		}
	}
	if pairs == 0 {
		return 0
	}
	return float64(switches) / float64(pairs)
}

// shannonEntropy is the entropy in bits per byte of s's own byte distribution.
func shannonEntropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

func isBase64Text(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}
