package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// APIList returns one page of tools (docs/api.md):
// ?q=&server=&category=&status=&tag=&risk=&sort=&limit=&cursor=.
func (h ToolsHandler) APIList(c echo.Context) error {
	q := toolQuery(c)
	if raw := c.QueryParam("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil {
			return verr.New("limit", "must be a whole number between 1 and "+strconv.Itoa(tools.MaxLimit))
		}
		q.Limit = n
		if n == 0 {
			q.Limit = -1 // "limit=0" is a mistake, not "the default"
		}
	}
	page, err := h.Tools.List(c.Request().Context(), q)
	if err != nil {
		return err
	}
	list := page.Items
	if list == nil {
		list = []tools.Item{}
	}
	if !PrincipalOf(c).Can(auth.PermToolInspect) {
		for i := range list {
			list[i].EnableOverride = nil // as apiTool: tool.inspect only
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": list, "next_cursor": page.NextCursor})
}

// apiTool is a tool with its configuration (secret values masked) and latest validation.
type apiTool struct {
	tools.Item
	Configuration map[string]map[string]json.RawMessage `json:"configuration"`
	Validation    *tools.Validation                     `json:"validation"`
}

func (t apiTool) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(t.Item)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(struct {
		Configuration map[string]map[string]json.RawMessage `json:"configuration,omitempty"` // tool.inspect only
		Validation    *tools.Validation                     `json:"validation"`
	}{t.Configuration, t.Validation})
	if err != nil {
		return nil, err
	}
	// Both are objects: splice the extra fields into the tool's.
	return append(append(bytes.TrimSuffix(base, []byte("}")), ','), extra[1:]...), nil
}

// writeTool answers with one tool, its configuration and its latest validation.
func (h ToolsHandler) writeTool(c echo.Context, it tools.Item) error {
	out, err := h.apiTool(c, it)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (h ToolsHandler) apiTool(c echo.Context, it tools.Item) (apiTool, error) {
	ctx := c.Request().Context()
	if !PrincipalOf(c).Can(auth.PermToolInspect) {
		// Configuration, findings and why an administrator overrode them: tool.inspect only.
		it.EnableOverride = nil
		return apiTool{Item: it}, nil
	}
	cfg, err := h.Tools.Configuration(ctx, it.ID)
	if err != nil {
		return apiTool{}, err
	}
	out := apiTool{Item: it, Configuration: cfg.APIView(it.InputSchema)}
	v, ok, err := h.Tools.LatestValidation(ctx, it)
	if err != nil {
		return apiTool{}, err
	}
	if ok {
		out.Validation = &v
	}
	return out, nil
}

// APIGet returns one tool.
func (h ToolsHandler) APIGet(c echo.Context) error {
	it, err := h.Tools.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.writeTool(c, it)
}

// enableInput is the optional body of POST /api/v1/tools/:id/enable.
type enableInput struct {
	Reason   string `json:"reason"`
	Override bool   `json:"override"`
	// DefinitionHash, when given, is the definition the client reviewed: an enable of a
	// tool whose definition changed since is refused (409 stale_definition).
	DefinitionHash string `json:"definition_hash"`
}

// APISetEnabled enables or disables one tool: 200 with the tool; 409 when its state does
// not allow it, or its definition is no longer the definition_hash sent; 422 when only an
// override with a reason would.
func (h ToolsHandler) APISetEnabled(enable bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in enableInput
		if c.Request().ContentLength != 0 {
			if err := bindJSONStrict(c, &in); err != nil {
				return err
			}
		}
		if err := overrideCheck(c, in.Override); err != nil {
			return err
		}
		ctx := c.Request().Context()
		out, err := h.Tools.SetEnabledSeen(ctx, ActorOf(c), c.Param("id"), enable, in.Reason, in.Override, in.DefinitionHash)
		if err != nil {
			return err
		}
		if err := out[0].Err(); err != nil {
			return err
		}
		it, err := h.Tools.Get(ctx, c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, it)
	}
}

// toolPatch is the body of PATCH /api/v1/tools/:id (docs/api.md). Absent fields stay as
// they are; "risk": null removes the override; "configuration" replaces the parameter
// settings ({"defaults": {...}, "fixed": {...}}; a secret sent back as "********" keeps
// its stored value).
type toolPatch struct {
	Risk          json.RawMessage `json:"risk"`
	TimeoutMS     json.RawMessage `json:"timeout_ms"`
	RateLimit     json.RawMessage `json:"rate_limit"`
	Category      json.RawMessage `json:"category"`
	Tags          *[]string       `json:"tags"`
	Configuration json.RawMessage `json:"configuration"`
	Reason        string          `json:"reason"`
	// ConfigurationVersion, when given, must be the current version (409 otherwise), so a
	// client does not undo a change it has not seen.
	ConfigurationVersion *int `json:"configuration_version"`
}

// nullableString reads a field that may be absent (nil), null ("") or a string.
func nullableString(raw json.RawMessage, field string, e *verr.Error) *string {
	if raw == nil {
		return nil
	}
	s := ""
	if string(raw) != "null" && json.Unmarshal(raw, &s) != nil {
		e.Add(field, "must be a string or null")
		return nil
	}
	return &s
}

func (in toolPatch) patch() (tools.Patch, error) {
	e := &verr.Error{}
	p := tools.Patch{Risk: nullableString(in.Risk, "risk", e), Category: nullableString(in.Category, "category", e),
		Reason: in.Reason, ExpectVersion: in.ConfigurationVersion, CreateCategory: true}
	if in.TimeoutMS != nil {
		n := 0
		if string(in.TimeoutMS) != "null" && json.Unmarshal(in.TimeoutMS, &n) != nil {
			e.Add("timeout_ms", "must be a whole number of milliseconds or null")
		}
		p.TimeoutMS = &n
	}
	if in.RateLimit != nil {
		n := 0
		if string(in.RateLimit) != "null" && json.Unmarshal(in.RateLimit, &n) != nil {
			e.Add("rate_limit", "must be a whole number of calls a minute or null")
		}
		p.RateLimit = &n
	}
	if in.Tags != nil {
		p.Tags, p.SetTags = *in.Tags, true
	}
	if in.Configuration != nil {
		if string(in.Configuration) == "null" {
			p.Params = map[string]tools.ParamInput{}
		} else {
			params, merge, err := tools.ParamInputs(in.Configuration)
			var ve *verr.Error
			if errors.As(err, &ve) {
				e.Fields = append(e.Fields, ve.Fields...)
			}
			p.Params, p.MergeParams = params, merge
		}
	}
	return p, e.Err()
}

// APIUpdate changes a tool's settings.
func (h ToolsHandler) APIUpdate(c echo.Context) error {
	var in toolPatch
	if _, err := bindJSONChange(c, &in, "reason", "configuration_version"); err != nil {
		return err
	}
	p, err := in.patch()
	if err != nil {
		return err
	}
	p.MayLowerRisk = PrincipalOf(c).Can(auth.PermToolOverride)
	it, err := h.Tools.Update(c.Request().Context(), ActorOf(c), c.Param("id"), p)
	if err != nil {
		return err
	}
	return h.writeTool(c, it)
}

// bulkInput is the body of POST /api/v1/tools/bulk.
type bulkInput struct {
	Action   string   `json:"action"` // enable, disable, tag, untag
	IDs      []string `json:"ids"`
	Tags     []string `json:"tags"`
	Reason   string   `json:"reason"`
	Override bool     `json:"override"`
	// DefinitionHashes, optional, maps a tool id to the definition_hash the client
	// reviewed: an enable of a tool whose definition changed since is refused for that
	// tool (its result's code stale_definition); the others move.
	DefinitionHashes map[string]string `json:"definition_hashes"`
}

// APIBulk applies one action to several tools: each tool's outcome is reported.
func (h ToolsHandler) APIBulk(c echo.Context) error {
	var in bulkInput
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	p := PrincipalOf(c)
	switch in.Action {
	case "enable", "disable":
		if !p.Can(auth.PermToolEnable) {
			return ErrForbidden
		}
		if err := overrideCheck(c, in.Override); err != nil {
			return err
		}
		out, err := h.Tools.SetEnabledSeenEach(ctx, ActorOf(c), in.IDs, in.Action == "enable", in.Reason, in.Override, in.DefinitionHashes)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"results": out})
	case "tag", "untag":
		if !p.Can(auth.PermToolConfigure) {
			return ErrForbidden
		}
		n, err := h.Tools.Tag(ctx, ActorOf(c), in.IDs, in.Tags, in.Action == "untag")
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"changed": n})
	}
	return verr.New("action", "must be enable, disable, tag or untag")
}
