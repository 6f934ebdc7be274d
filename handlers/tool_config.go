package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// configForm is what a submitted configuration form held, to show it again.
type configForm struct {
	values                  map[string]string // param name → value typed (never a secret)
	modes                   map[string]string
	risk, timeout, category string
	rateLimit               string
	tags, reason            string
	secretsTyped            bool
	// version is the configuration_version the form was opened at (nil when it had
	// none): shown again, not the one stored now, so saving the form after someone
	// else's change is still refused instead of putting back the values it holds.
	version *int
}

// toolConfig builds the Configuration tab: from the stored settings, or from a
// submitted form that came back with errors.
func (h ToolPageHandler) toolConfig(c echo.Context, it tools.Item, form *configForm, errs views.FormErrors) (*views.ToolConfig, error) {
	ctx := c.Request().Context()
	cfg, err := h.Tools.Configuration(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	cats, err := h.Tools.Categories(ctx)
	if err != nil {
		return nil, err
	}
	versions, err := h.Tools.ConfigVersions(ctx, it.ID, 20)
	if err != nil {
		return nil, err
	}
	v := &views.ToolConfig{CanEdit: PrincipalOf(c).Can(auth.PermToolConfigure), Errors: errs, Version: it.ConfigVersion,
		Risk: deref(it.RiskOverride), Category: deref(it.Category), Tags: strings.Join(it.Tags, ", ")}
	if it.TimeoutMS != nil {
		v.TimeoutMS = strconv.Itoa(*it.TimeoutMS)
	}
	if it.RateLimit != nil {
		v.RateLimit = strconv.Itoa(*it.RateLimit)
	}
	annotated := risk.Decide(risk.Input{Annotations: it.Annotations, Trusted: it.ServerTrusted})
	v.RiskOpts = []views.Option{{Value: "", Label: "By annotations (" + annotated.Level.Label() + ")"}}
	for _, l := range risk.Levels {
		v.RiskOpts = append(v.RiskOpts, views.Option{Value: string(l), Label: l.Label()})
	}
	for _, cat := range cats {
		v.Categories = append(v.Categories, views.Option{Value: cat.Name, Label: cat.Name})
	}
	for _, p := range tools.ConfigParams(it, cfg) {
		f := views.ToolConfigField{Name: p.Name, Type: p.Type, Kind: p.Kind, Mode: p.Mode, Value: p.Text,
			Description: p.Description, Required: p.Required, Secret: p.Secret, Stored: p.Stored}
		if p.Secret {
			f.Value = ""
		}
		for _, e := range p.Enum {
			t := jsonText(e)
			if s, ok := e.(string); ok {
				t = s
			}
			f.Options = append(f.Options, views.Option{Value: t, Label: t})
		}
		if p.Min != nil && !p.ExclusiveMin {
			f.Min = strconv.FormatFloat(*p.Min, 'g', -1, 64)
		}
		if p.Max != nil && !p.ExclusiveMax {
			f.Max = strconv.FormatFloat(*p.Max, 'g', -1, 64)
		}
		if form != nil {
			f.Mode = form.modes[p.Name]
			if !p.Secret {
				f.Value = form.values[p.Name]
			}
		}
		v.Fields = append(v.Fields, f)
	}
	if form != nil {
		v.Risk, v.TimeoutMS, v.Category, v.Tags, v.Reason = form.risk, form.timeout, form.category, form.tags, form.reason
		v.RateLimit = form.rateLimit
		v.SecretsDropped = form.secretsTyped
		if form.version != nil {
			v.Version = *form.version
		}
	}
	for _, cv := range versions {
		v.Versions = append(v.Versions, views.ToolConfigVersion{Version: cv.Version, Actor: cv.Actor, Reason: cv.Reason,
			At: cv.CreatedAt, Detail: indentJSON(cv.Configuration)})
	}
	return v, nil
}

// parseToolConfig reads the configuration form of it into a patch. Field names:
// param.<name>.mode (none, default, fixed) and param.<name>.value per top-level
// parameter; risk, timeout_ms, rate_limit, category, tags (comma-separated) and reason.
func parseToolConfig(c echo.Context, params []tools.ConfigParam) (tools.Patch, configForm, *verr.Error) {
	f := configForm{values: map[string]string{}, modes: map[string]string{}, risk: c.FormValue("risk"),
		timeout: strings.TrimSpace(c.FormValue("timeout_ms")), rateLimit: strings.TrimSpace(c.FormValue("rate_limit")),
		category: c.FormValue("category"), tags: c.FormValue("tags"), reason: strings.TrimSpace(c.FormValue("reason"))}
	e := &verr.Error{}
	p := tools.Patch{Risk: &f.risk, Category: &f.category, SetTags: true, Reason: f.reason, Params: map[string]tools.ParamInput{}}
	p.Tags = strings.Split(f.tags, ",")
	timeout := 0
	if f.timeout != "" {
		n, err := strconv.Atoi(f.timeout)
		if err != nil {
			e.Add("timeout_ms", "must be a whole number of milliseconds (or empty for the server's timeout)")
		}
		timeout = n
	}
	p.TimeoutMS = &timeout
	// Empty (or 0) removes the limit; a form without the field (one rendered before it
	// existed) leaves it as it is rather than removing a limit set through the API.
	if c.Request().Form.Has("rate_limit") {
		limit := 0
		if f.rateLimit != "" {
			n, err := strconv.Atoi(f.rateLimit)
			if err != nil {
				e.Add("rate_limit", "must be a whole number of calls a minute (or empty for no limit of its own)")
			}
			limit = n
		}
		p.RateLimit = &limit
	}
	if v, err := strconv.Atoi(c.FormValue("configuration_version")); err == nil {
		p.ExpectVersion, f.version = &v, &v
	}
	p.MayLowerRisk = PrincipalOf(c).Can(auth.PermToolOverride)
	for _, cp := range params {
		mode := c.FormValue("param." + cp.Name + ".mode")
		val := c.FormValue("param." + cp.Name + ".value")
		switch mode {
		case "", "none":
			mode = tools.ModeNone
		case tools.ModeDefault, tools.ModeFixed:
		default:
			e.Add("params."+cp.Name, "choose how the parameter is set: caller decides, default or fixed")
		}
		f.modes[cp.Name] = mode
		if cp.Secret || tools.TypedSecret(val, cp.Kind) {
			// A credential typed into an ordinary parameter is stored encrypted too,
			// and like a secret one never shown back when the form must be fixed.
			f.secretsTyped = f.secretsTyped || val != ""
		} else {
			f.values[cp.Name] = val
		}
		if mode == tools.ModeNone {
			continue
		}
		text := val
		p.Params[cp.Name] = tools.ParamInput{Mode: mode, Text: &text}
	}
	return p, f, e
}

// Configure saves the configuration form. Bad input changes nothing and shows the tab
// again (422) with each error next to its field.
func (h ToolPageHandler) Configure(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // for the page a bad form comes back on (Show)
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	cfg, err := h.Tools.Configuration(ctx, it.ID)
	if err != nil {
		return err
	}
	patch, form, perr := parseToolConfig(c, tools.ConfigParams(it, cfg))
	err = perr.Err()
	var out tools.Item
	if err == nil {
		out, err = h.Tools.Update(ctx, ActorOf(c), it.ID, patch)
	}
	if err != nil {
		status := http.StatusUnprocessableEntity
		fe, ok := formErrors(err)
		if se, _ := fault.As(err); se != nil && se.Code == tools.CodeStale {
			fe, ok, status = views.FormErrors{"configuration_version": httperr.Sentence(se.Message)}, true, http.StatusConflict
		}
		if !ok {
			return err
		}
		v := h.toolPageAt(c, it, views.ToolTabConfiguration, last)
		var cerr error
		if v.Config, cerr = h.toolConfig(c, it, &form, fe); cerr != nil {
			return cerr
		}
		return render(c, status, views.Tool(v))
	}
	msg := "Nothing changed: the configuration was already like that."
	if out.ConfigVersion != it.ConfigVersion {
		msg = fmt.Sprintf("Configuration of %s saved as version %d.", out.QualifiedName(), out.ConfigVersion)
		if out.Status != it.Status {
			msg += " The tool is now " + out.Status + "."
		}
	}
	setFlash(c, "success", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, toolTabURL(it.ID, views.ToolTabConfiguration, nil))
}

// Reset returns the tool to its defaults (a new configuration version records it).
func (h ToolPageHandler) Reset(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	reset := h.Tools.Reset // keeps a risk level that clearing would lower
	if PrincipalOf(c).Can(auth.PermToolOverride) {
		reset = h.Tools.ResetAll
	}
	out, err := reset(ctx, ActorOf(c), it.ID)
	return h.redirectWithOutcome(c, err, func() string {
		kept := ""
		if out.RiskOverride != nil {
			kept = fmt.Sprintf(" Its %s risk level stays: only an administrator may clear a level when that lowers the risk.", *out.RiskOverride)
		}
		if out.ConfigVersion == it.ConfigVersion {
			return it.QualifiedName() + " already runs with its defaults." + kept
		}
		return fmt.Sprintf("%s reset to its defaults (configuration version %d).%s", it.QualifiedName(), out.ConfigVersion, kept)
	}, toolTabURL(it.ID, views.ToolTabConfiguration, nil))
}

// Validate validates the tool's current definition again and says what it found.
func (h ToolPageHandler) Validate(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	out, err := h.Tools.Revalidate(ctx, ActorOf(c), it.ID)
	return h.redirectWithOutcome(c, err, func() string {
		found := "no findings"
		if w := deref(out.ValidationWorst); w != "" {
			found = "worst finding: " + w
		}
		return fmt.Sprintf("Validated %s again (%s); it is %s.", out.QualifiedName(), found, out.Status)
	}, toolsBack(c, toolTabURL(it.ID, views.ToolTabOverview, nil)))
}
