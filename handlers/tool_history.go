package handlers

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

// toolHistoryPerPage is how many changes a page of the History tab shows.
const toolHistoryPerPage = 50

// toolHistory builds the History tab: the changes of the tool's state and settings,
// newest first, a page at a time (before: the Older link's).
func (h ToolPageHandler) toolHistory(ctx context.Context, it tools.Item, before string) (*views.ToolHistory, error) {
	beforeID, err := olderThan(before, "a change")
	if err != nil {
		return nil, err
	}
	rows, next, err := h.Registry.ToolHistoryPage(ctx, it.ID, beforeID, toolHistoryPerPage)
	if err != nil {
		return nil, err
	}
	out := &views.ToolHistory{}
	if next > 0 {
		out.OlderURL = toolTabURL(it.ID, views.ToolTabHistory, url.Values{"before": {strconv.FormatInt(next, 10)}})
	}
	if beforeID > 0 {
		out.NewestURL = toolTabURL(it.ID, views.ToolTabHistory, nil)
	}
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
		// A definition's changes, as discovery stored them before it bounded them, could
		// be thousands, quoting a server's names whole.
		if _, ok := meta["changes"]; ok {
			var m struct {
				Changes []registry.Change `json:"changes"`
			}
			if json.Unmarshal(r.Metadata, &m) == nil {
				meta["changes"] = registry.ClipChanges(m.Changes)
			}
		}
		if len(meta) > 0 {
			b, _ := json.Marshal(meta)
			hr.Meta = indentJSON(b)
		}
		out.Rows = append(out.Rows, hr)
	}
	return out, nil
}
