package handlers

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

// toolHistory builds the History tab: every change of the tool's state and settings.
func (h ToolPageHandler) toolHistory(ctx context.Context, it tools.Item) (*views.ToolHistory, error) {
	rows, err := h.Registry.ToolHistory(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	out := &views.ToolHistory{}
	for _, r := range rows {
		hr := views.ToolHistoryRow{From: deref(r.From), To: r.To, Actor: r.Actor, Reason: r.Reason, At: r.CreatedAt}
		var meta map[string]any
		_ = json.Unmarshal(r.Metadata, &meta)
		if meta["override"] == true {
			hr.Notes = append(hr.Notes, "Override: enabled despite its findings or a failed test")
			delete(meta, "override")
		}
		if meta["testing_skipped"] == true {
			hr.Notes = append(hr.Notes, "Testing was skipped")
			delete(meta, "testing_skipped")
		}
		fromHash, _ := meta["from_hash"].(string)
		toHash, _ := meta["to_hash"].(string)
		if fromHash != "" && toHash != "" {
			hr.DiffURL = toolTabURL(it.ID, views.ToolTabSchema, url.Values{"from": {fromHash}, "to": {toHash}}) + "#compare-h"
		}
		if len(meta) > 0 {
			b, _ := json.Marshal(meta)
			hr.Meta = indentJSON(b)
		}
		out.Rows = append(out.Rows, hr)
	}
	return out, nil
}
