package handlers

import (
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
	return h.renderExecutions(c, http.StatusOK, st, views.ExecutionSettingsForm{TTLValue: value, TTLUnit: unit,
		HighSeparation: string(st.HighSeparation)}, nil)
}

// SaveExecutionSettings stores the execution settings (the service audits them). Bad input
// changes nothing: the form comes back (422) with the input kept and each error next
// to its field.
func (h SettingsHandler) SaveExecutionSettings(c echo.Context) error {
	ctx := c.Request().Context()
	form := views.ExecutionSettingsForm{TTLValue: strings.TrimSpace(c.FormValue("approval_ttl_value")),
		TTLUnit: c.FormValue("approval_ttl_unit"), HighSeparation: c.FormValue("high_separation")}
	ttl, err := parseTTL(form.TTLValue, form.TTLUnit)
	p := executions.SettingsPatch{ApprovalTTL: &ttl}
	_, given := c.Request().PostForm["high_separation"]
	if given {
		sep := decide.Separation(form.HighSeparation)
		p.HighSeparation = &sep
	}
	// Left out (the page always sends it), the separation is kept, as the API keeps it:
	// the service reads it in the transaction that writes, so a concurrent change stays.
	var saved executions.Settings
	if err == nil {
		saved, err = h.Executions.PatchSettings(ctx, ActorOf(c), p)
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
		return h.renderExecutions(c, http.StatusUnprocessableEntity, st, form, fe)
	}
	setFlash(c, "success", "Execution settings saved: "+settingsWords(saved), h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/settings/executions")
}

func (h SettingsHandler) renderExecutions(c echo.Context, status int, st executions.Settings, form views.ExecutionSettingsForm, errs views.FormErrors) error {
	v := views.ExecutionSettingsPage{Layout: h.layout(c, "Execution settings"), Form: form, Errors: errs,
		Current: "In force: " + settingsWords(st)}
	for _, u := range ttlUnits {
		v.Units = append(v.Units, views.Option{Value: u.key, Label: u.key})
	}
	if form.TTLUnit == "seconds" {
		// Set through the API to a value that is not whole minutes.
		v.Units = append([]views.Option{{Value: "seconds", Label: "seconds"}}, v.Units...)
	}
	return render(c, status, views.ExecutionSettings(v))
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

// settingsWords says what the settings mean.
func settingsWords(st executions.Settings) string {
	v, u := ttlForm(st.ApprovalTTL)
	if v == "1" {
		u = strings.TrimSuffix(u, "s")
	}
	s := fmt.Sprintf("plans wait %s %s for approval", v, u)
	switch st.HighSeparation {
	case decide.SeparationAlways:
		return s + "; a high-risk plan always needs an approver other than its requester."
	case decide.SeparationOff:
		return s + "; the requester of a high-risk plan may approve it with its phrase."
	}
	return s + "; a high-risk plan needs an approver other than its requester whenever another person who may approve is active."
}
