package registry

import (
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/services/template"
)

// draft is a registration being validated: plain fields plus secrets, each either a
// stored ciphertext (kept) or a new plain value (to encrypt).
type draft struct {
	id, name, description, typ, command, workingDir, url string
	template                                             string
	args                                                 []string
	env, headers                                         map[string]secretValue
	authType, authHeader                                 string
	authToken                                            secretValue
	timeoutMS, retries, healthIntervalMS                 int
	enabled, trusted, autoEnable                         bool
}

// secretValue is either a stored ciphertext or a new plain value.
type secretValue struct {
	cipher string
	plain  *string
}

func (v secretValue) set() bool { return v.cipher != "" || (v.plain != nil && *v.plain != "") }

func draftOf(s Server) draft {
	d := draft{id: s.ID, name: s.Name, description: s.Description, typ: s.Type, command: s.Command,
		workingDir: s.WorkingDir, url: s.URL, template: s.Template, args: slices.Clone(s.Args), authType: s.AuthType,
		authHeader: s.AuthHeader, authToken: secretValue{cipher: s.AuthToken}, timeoutMS: s.TimeoutMS,
		retries: s.Retries, healthIntervalMS: s.HealthIntervalMS, enabled: s.Enabled, trusted: s.Trusted,
		autoEnable: s.AutoEnable, env: map[string]secretValue{}, headers: map[string]secretValue{}}
	for k, c := range s.Env {
		d.env[k] = secretValue{cipher: c}
	}
	for k, c := range s.Headers {
		d.headers[k] = secretValue{cipher: c}
	}
	return d
}

func newDraft(id string) draft {
	return draft{id: id, authType: AuthNone, timeoutMS: DefaultTimeoutMS, retries: DefaultRetries,
		healthIntervalMS: DefaultHealthIntervalMS, enabled: true,
		env: map[string]secretValue{}, headers: map[string]secretValue{}}
}

func (d *draft) apply(p Patch) {
	setIf(&d.name, p.Name)
	setIf(&d.description, p.Description)
	setIf(&d.typ, p.Type)
	setIf(&d.command, p.Command)
	if p.Args != nil {
		d.args = slices.Clone(*p.Args)
	}
	setIf(&d.workingDir, p.WorkingDir)
	setIf(&d.url, p.URL)
	setIf(&d.template, p.Template)
	applySecrets(d.env, p.Env, p.ReplaceEnv)
	applySecrets(d.headers, p.Headers, p.ReplaceHeaders)
	setIf(&d.authType, p.AuthType)
	setIf(&d.authHeader, p.AuthHeader)
	if p.AuthToken != nil {
		v := *p.AuthToken
		d.authToken = secretValue{plain: &v}
	}
	if p.TimeoutMS != nil {
		d.timeoutMS = *p.TimeoutMS
		if d.timeoutMS == 0 {
			d.timeoutMS = DefaultTimeoutMS
		}
	}
	setIf(&d.retries, p.Retries)
	if p.HealthIntervalMS != nil {
		d.healthIntervalMS = *p.HealthIntervalMS
		if d.healthIntervalMS == 0 {
			d.healthIntervalMS = DefaultHealthIntervalMS
		}
	}
	setIf(&d.enabled, p.Enabled)
	setIf(&d.trusted, p.Trusted)
	setIf(&d.autoEnable, p.AutoEnable)
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func applySecrets(dst map[string]secretValue, changes map[string]*string, replace bool) {
	if replace {
		for k := range dst {
			if _, ok := changes[k]; !ok {
				delete(dst, k)
			}
		}
	}
	for k, v := range changes {
		if v == nil {
			delete(dst, k)
			continue
		}
		val := *v
		dst[k] = secretValue{plain: &val}
	}
}

// connectionChanged reports whether next connects differently from cur (so the live
// session must be replaced).
func connectionChanged(cur, next draft) bool {
	if cur.typ != next.typ || cur.command != next.command || !slices.Equal(cur.args, next.args) ||
		cur.workingDir != next.workingDir || cur.url != next.url || cur.template != next.template || cur.authType != next.authType ||
		cur.authHeader != next.authHeader || cur.timeoutMS != next.timeoutMS || cur.retries != next.retries ||
		cur.healthIntervalMS != next.healthIntervalMS || next.authToken.plain != nil {
		return true
	}
	for _, pair := range [][2]map[string]secretValue{{cur.env, next.env}, {cur.headers, next.headers}} {
		if len(pair[0]) != len(pair[1]) {
			return true
		}
		for k, v := range pair[1] {
			if _, ok := pair[0][k]; !ok || v.plain != nil {
				return true
			}
		}
	}
	return false
}

// ChangesCommand reports whether applying p to cur (nil for a new server) sets what
// runs on the host: a stdio server's type becomes stdio, or its command, args, working
// directory or env change; or a template server gets a template whose tools run
// commands (a new one, or changed). Such a change needs auth.PermServerCommand.
func ChangesCommand(cur *Server, p Patch) bool {
	next := newDraft("")
	var before *draft
	if cur != nil {
		d := draftOf(*cur)
		before, next = &d, draftOf(*cur)
	}
	next.apply(p)
	return commandChanged(before, next)
}

// commandChanged: see ChangesCommand.
func commandChanged(cur *draft, next draft) bool {
	if next.typ == TypeTemplate {
		if cur != nil && cur.typ == TypeTemplate && cur.template == normalizeTemplate(next.template) {
			return false
		}
		return template.HasCommands(normalizeTemplate(next.template)) // as it will be stored
	}
	if next.typ != TypeStdio {
		return false
	}
	if cur == nil || cur.typ != TypeStdio || cur.command != strings.TrimSpace(next.command) ||
		!slices.Equal(cur.args, next.args) && !(len(cur.args) == 0 && len(next.args) == 0) ||
		cur.workingDir != strings.TrimSpace(next.workingDir) || len(cur.env) != len(next.env) {
		return true
	}
	for k, v := range next.env {
		if _, ok := cur.env[k]; !ok || v.plain != nil {
			return true
		}
	}
	return false
}

// ChangesTrustedTarget reports whether applying p to the trusted server cur changes
// what it is (see ErrTrustedTargetChange); false for an untrusted one.
func ChangesTrustedTarget(cur Server, p Patch) bool {
	if !cur.Trusted {
		return false
	}
	before, next := draftOf(cur), draftOf(cur)
	next.apply(p)
	return targetChanged(&before, next)
}

// targetChanged: what the server runs or reaches, and with which secrets, differs.
func targetChanged(cur *draft, next draft) bool {
	if commandChanged(cur, next) {
		return true
	}
	// Clearing a token that is not stored changes nothing.
	tokenChanged := next.authToken.plain != nil && (*next.authToken.plain != "" || cur.authToken.cipher != "")
	if cur.typ != next.typ || cur.url != strings.TrimSpace(next.url) || cur.template != normalizeTemplate(next.template) || cur.authType != next.authType ||
		cur.authHeader != next.authHeader || tokenChanged || len(cur.headers) != len(next.headers) {
		return true
	}
	for k, v := range next.headers {
		if _, ok := cur.headers[k]; !ok || v.plain != nil {
			return true
		}
	}
	return false
}
