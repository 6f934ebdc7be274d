package web_test

import (
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/tools"
)

// PATCH /api/v1/categories/:id changes the fields it is given and keeps the others: it
// replaced the whole category, so turning auto-enable on cleared the description and
// {"auto_enable":false} alone was refused for want of a name.
func TestCategoryPatchKeepsOmittedFields(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	var cat tools.Category
	api.JSON(http.MethodPost, "/api/v1/categories", map[string]any{"name": "files", "description": "reads and writes files"}, http.StatusCreated, &cat)

	var got tools.Category
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"auto_enable": true}, http.StatusOK, &got)
	if !got.AutoEnable || got.Name != "files" || got.Description != "reads and writes files" {
		t.Fatalf("after {auto_enable: true}: %+v, want only auto_enable changed", got)
	}
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"auto_enable": false}, http.StatusOK, &got)
	if got.AutoEnable || got.Description != "reads and writes files" {
		t.Fatalf("after {auto_enable: false}: %+v", got)
	}
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"name": "disk", "description": ""}, http.StatusOK, &got)
	if got.Name != "disk" || got.Description != "" || got.AutoEnable {
		t.Fatalf("after {name: disk, description: \"\"}: %+v", got)
	}
	// A field given is still checked, and a bad one changes nothing.
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"name": "Not A Name!"}, http.StatusBadRequest, nil)
	api.JSON(http.MethodPatch, "/api/v1/categories/00000000-0000-0000-0000-000000000001", map[string]any{"auto_enable": true}, http.StatusNotFound, nil)
}
