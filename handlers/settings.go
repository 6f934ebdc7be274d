package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// SettingsHandler serves the run-time settings pages (settings.manage).
type SettingsHandler struct {
	*Shell
}

// ttlUnits are the units the approval expiry is given in, largest last.
var ttlUnits = []struct {
	key  string
	unit time.Duration
}{{"minutes", time.Minute}, {"hours", time.Hour}, {"days", 24 * time.Hour}}

// ExecutionSettings renders the execution settings form with what is in force.
func (h SettingsHandler) ExecutionSettings(c echo.Context) error {
	st, err := h.Executions.Settings(c.Request().Context())
	if err != nil {
		return err
	}
	value, unit := ttlForm(st.ApprovalTTL)
	form := views.ExecutionSettingsForm{TTLValue: value, TTLUnit: unit, HighSeparation: string(st.HighSeparation)}
	return h.renderExecutions(c, http.StatusOK, st, form, form, nil)
}

// SaveExecutionSettings stores what the person changed (the service audits it). The form
// sends back what it showed (<field>_was): a field left as shown is not a change, so a
// form opened before someone else saved does not put their field back. A field both
// changed is refused (409) with what it is now. Bad input changes nothing: the form comes
// back (422) with the input kept and each error next to its field.
func (h SettingsHandler) SaveExecutionSettings(c echo.Context) error {
	ctx := c.Request().Context()
	form := views.ExecutionSettingsForm{TTLValue: strings.TrimSpace(c.FormValue("approval_ttl_value")),
		TTLUnit: c.FormValue("approval_ttl_unit"), HighSeparation: c.FormValue("high_separation")}
	// Shown again as sent, so a form that came back stale stays refused until reloaded.
	was := views.ExecutionSettingsForm{TTLValue: strings.TrimSpace(c.FormValue("approval_ttl_value_was")),
		TTLUnit: c.FormValue("approval_ttl_unit_was"), HighSeparation: c.FormValue("high_separation_was")}
	posted := c.Request().PostForm
	// A field is sent only if changed from what the form showed, with what it showed: the
	// service compares that with what is in force under its lock on the settings, so of
	// two saves at once the later cannot undo the earlier. Without what the form showed
	// (another client's form), each field sent is a change.
	var p executions.SettingsPatch
	ttl, err := parseTTL(form.TTLValue, form.TTLUnit)
	wasTTL, werr := parseTTL(was.TTLValue, was.TTLUnit)
	_, shownTTL := posted["approval_ttl_value_was"]
	shownTTL = shownTTL && werr == nil
	if !shownTTL || err != nil || ttl != wasTTL {
		if err == nil {
			p.ApprovalTTL = &ttl
		}
		if shownTTL {
			p.WasApprovalTTL = &wasTTL
		}
	}
	_, given := posted["high_separation"]
	_, shownSep := posted["high_separation_was"]
	// A form given back after one that sent no _was fields (an older page) has them
	// empty: as not shown, like an unreadable expiry above.
	wasSep := decide.Separation(was.HighSeparation)
	shownSep = shownSep && wasSep.Valid()
	if given && (!shownSep || form.HighSeparation != was.HighSeparation) {
		sep := decide.Separation(form.HighSeparation)
		p.HighSeparation = &sep
		if shownSep {
			p.WasHighSeparation = &wasSep
		}
	}
	var saved executions.Settings
	switch {
	case err == nil && p.ApprovalTTL == nil && p.HighSeparation == nil:
		st, err := h.Executions.Settings(ctx)
		if err != nil {
			return err
		}
		setFlash(c, "info", "Nothing changed: you changed no setting. In force: "+settingsWords(st), h.SecureCookies)
		return c.Redirect(http.StatusSeeOther, "/settings/executions")
	case err == nil:
		saved, err = h.Executions.PatchSettings(ctx, ActorOf(c), p)
	}
	// Shown again with the form as sent, so a form that came back stale stays refused
	// until reloaded.
	if se := (*executions.StaleSettings)(nil); errors.As(err, &se) {
		return h.renderExecutions(c, http.StatusConflict, se.Now, form, was, staleErrors(se))
	}
	if err != nil {
		fe, ok := formErrors(err)
		if !ok {
			return err
		}
		st, serr := h.Executions.Settings(ctx)
		if serr != nil {
			return serr
		}
		if !given {
			form.HighSeparation = string(st.HighSeparation)
		}
		return h.renderExecutions(c, http.StatusUnprocessableEntity, st, form, was, fe)
	}
	setFlash(c, "success", "Execution settings saved: "+settingsWords(saved), h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/settings/executions")
}

// staleErrors are the page's words for a save refused as stale: at each field, what it
// is now, and a notice naming them.
func staleErrors(se *executions.StaleSettings) views.FormErrors {
	errs := views.FormErrors{}
	var stale []string
	for _, f := range se.Fields {
		var now string
		switch f {
		case "approval_ttl":
			now = approvalTTLWords(se.Now.ApprovalTTL)
			stale = append(stale, "how long a plan waits for approval (now "+now+")")
		case "high_separation":
			now = "“" + separationWords(se.Now.HighSeparation) + "”"
			stale = append(stale, "who approves a high-risk plan (now "+now+")")
		default:
			continue
		}
		errs[f] = "Someone else set this to " + now + " since you opened this form."
	}
	errs["stale"] = "Someone else changed " + strings.Join(stale, " and ") +
		" since you opened this form. Reload to see the settings as they are now, then make your change again if you still want it."
	return errs
}

func (h SettingsHandler) renderExecutions(c echo.Context, status int, st executions.Settings, form, was views.ExecutionSettingsForm, errs views.FormErrors) error {
	v := views.ExecutionSettingsPage{Layout: h.layout(c, "Execution settings"), Form: form, Errors: errs,
		Current: "In force: " + settingsWords(st)}
	for _, u := range ttlUnits {
		v.Units = append(v.Units, views.Option{Value: u.key, Label: u.key})
	}
	if form.TTLUnit == "seconds" {
		// Set through the API to a value that is not whole minutes.
		v.Units = append([]views.Option{{Value: "seconds", Label: "seconds"}}, v.Units...)
	}
	return render(c, status, views.ExecutionSettings(v, was))
}

// ttlForm is d in the largest unit that shows it exactly.
func ttlForm(d time.Duration) (string, string) {
	for i := len(ttlUnits) - 1; i >= 0; i-- {
		if u := ttlUnits[i]; d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10), u.key
		}
	}
	return strconv.FormatInt(int64(d/time.Second), 10), "seconds"
}

// parseTTL reads the expiry from the form; its range is the service's to check.
func parseTTL(value, unit string) (time.Duration, error) {
	per := time.Duration(0)
	for _, u := range ttlUnits {
		if u.key == unit {
			per = u.unit
		}
	}
	if unit == "seconds" {
		per = time.Second
	}
	switch {
	case value == "":
		return 0, verr.New("approval_ttl", "is required: how long a plan may wait for approval")
	case per == 0:
		return 0, verr.New("approval_ttl", "pick minutes, hours or days")
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 {
		return 0, verr.New("approval_ttl", "must be a whole number, 1 or more")
	}
	if n > int64(31*24*time.Hour/per) {
		return 0, verr.New("approval_ttl", "must be between one minute and 30 days")
	}
	return time.Duration(n) * per, nil
}

// approvalTTLWords is an approval expiry in words, as the form shows it: "1 day", "3 hours".
func approvalTTLWords(d time.Duration) string {
	v, u := ttlForm(d)
	if v == "1" {
		u = strings.TrimSuffix(u, "s")
	}
	return v + " " + u
}

// separationWords is who approves a high-risk plan, in a few words.
func separationWords(sep decide.Separation) string {
	switch sep {
	case decide.SeparationAlways:
		return "always someone other than its requester"
	case decide.SeparationOff:
		return "its requester may approve it"
	}
	return "someone other than its requester whenever another person who may approve is active"
}

// settingsWords says what the settings mean.
func settingsWords(st executions.Settings) string {
	s := fmt.Sprintf("plans wait %s for approval", approvalTTLWords(st.ApprovalTTL))
	switch st.HighSeparation {
	case decide.SeparationAlways:
		return s + "; a high-risk plan always needs an approver other than its requester."
	case decide.SeparationOff:
		return s + "; the requester of a high-risk plan may approve it with its phrase."
	}
	return s + "; a high-risk plan needs an approver other than its requester whenever another person who may approve is active."
}
