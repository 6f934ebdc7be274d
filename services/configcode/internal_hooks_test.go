package configcode

import (
	"context"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// PlanParamsForTest plans the file's parameters params of the stored tool toolID whose
// stored parameters are stored, as planTool does, and returns the plan's changes, what
// it reports as not applied, and whether applying would set the parameters.
func (s *Service) PlanParamsForTest(ctx context.Context, toolID string, stored map[string]tools.Setting, params map[string]Param) ([]registry.FieldChange, []string, bool) {
	ft := &Tool{Name: "s__t", Params: params}
	cur := &storedTool{ID: toolID, Server: "s", Name: "t", Config: tools.Configuration{Params: stored}}
	it := &Item{Kind: KindTool, Name: ft.Name, tool: ft, cur: cur}
	var not []string
	s.planParams(ctx, it, ft, cur, false, func(field, msg string) { not = append(not, field+": "+msg) })
	return it.Changes, not, it.params != nil
}
