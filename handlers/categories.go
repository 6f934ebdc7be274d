package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// CategoriesHandler serves tool categories: the page and the JSON API.
type CategoriesHandler struct {
	*Shell
	Tools *tools.Service
}

// List renders the categories with a form to add one.
func (h CategoriesHandler) List(c echo.Context) error {
	return h.render(c, http.StatusOK, "", views.CategoryForm{}, "", nil)
}

// render shows the page; version is the updated_at the failed edit form of editID was
// opened at, shown again as sent so a stale form stays refused until reloaded.
func (h CategoriesHandler) render(c echo.Context, status int, editID string, form views.CategoryForm, version string, errs views.FormErrors) error {
	list, err := h.Tools.Categories(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.CategoriesPage{Layout: h.layout(c, "Tool categories"), Form: form, Errors: errs, EditID: editID,
		CanEdit: PrincipalOf(c).Can(auth.PermToolConfigure)}
	versions := map[string]string{}
	for _, cat := range list {
		v.Categories = append(v.Categories, views.CategoryRow{ID: cat.ID, Name: cat.Name, Description: cat.Description,
			AutoEnable: cat.AutoEnable, Tools: cat.Tools})
		versions[cat.ID] = cat.UpdatedAt.Format(time.RFC3339Nano)
	}
	if editID != "" {
		versions[editID] = version
	}
	return render(c, status, views.Categories(v, versions))
}

// categoryInput reads the form; an edit form carries the updated_at it was opened at,
// so saving it after someone else's save is refused instead of undoing that save.
func categoryInput(c echo.Context) tools.CategoryInput {
	in := tools.CategoryInput{Name: c.FormValue("name"), Description: c.FormValue("description"),
		AutoEnable: c.FormValue("auto_enable") != ""}
	if at, err := time.Parse(time.RFC3339Nano, c.FormValue("updated_at")); err == nil && c.Param("id") != "" {
		in.ExpectUpdatedAt = &at
	}
	return in
}

// Save creates a category (POST /tools/categories) or changes one (POST /tools/categories/:id).
func (h CategoriesHandler) Save(c echo.Context) error {
	in := categoryInput(c)
	cat, err := h.Tools.SaveCategory(c.Request().Context(), ActorOf(c), c.Param("id"), in)
	form := views.CategoryForm{Name: in.Name, Description: in.Description, AutoEnable: in.AutoEnable}
	if f, _ := fault.As(err); f != nil && f.Code == tools.CodeStaleCategory {
		msg := staleCategoryForm
		if now, ok := f.Details.(tools.Category); ok {
			msg = staleCategoryWords(now)
		}
		return h.render(c, http.StatusConflict, c.Param("id"), form, c.FormValue("updated_at"), views.FormErrors{"updated_at": msg})
	}
	var ve *verr.Error
	if errors.As(err, &ve) {
		errs := views.FormErrors{}
		for _, f := range ve.Fields {
			errs[f.Field] = f.Message
		}
		return h.render(c, http.StatusUnprocessableEntity, c.Param("id"), form, c.FormValue("updated_at"), errs)
	}
	return h.redirectWithOutcome(c, err, func() string { return "Category " + cat.Name + " saved." }, "/tools/categories")
}

// staleCategoryForm is shown in an edit form saved after someone else saved the category.
const staleCategoryForm = "Someone else changed this category since you opened this form. Reload the page to see their changes, then make yours again: what you typed is below."

// staleCategoryWords is staleCategoryForm saying what the category is now.
func staleCategoryWords(now tools.Category) string {
	auto := "off"
	if now.AutoEnable {
		auto = "on"
	}
	desc := "no description"
	if now.Description != "" {
		desc = fmt.Sprintf("description %q", now.Description)
	}
	return fmt.Sprintf("Someone else changed this category since you opened this form: it is now named %q, with %s, and auto-enable %s. "+
		"Reload the page to see their changes, then make yours again: what you typed is below.", now.Name, desc, auto)
}

// Delete removes a category; its tools stay, without one.
func (h CategoriesHandler) Delete(c echo.Context) error {
	err := h.Tools.DeleteCategory(c.Request().Context(), ActorOf(c), c.Param("id"))
	return h.redirectWithOutcome(c, err, func() string { return "Category deleted; its tools have no category now." }, "/tools/categories")
}

// categoryBody is the JSON body of POST /api/v1/categories.
type categoryBody struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	AutoEnable  bool   `json:"auto_enable"`
}

// APIList returns every category.
func (h CategoriesHandler) APIList(c echo.Context) error {
	list, err := h.Tools.Categories(c.Request().Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []tools.Category{}
	}
	return c.JSON(http.StatusOK, map[string]any{"categories": list})
}

// categoryPatchBody is the JSON body of PATCH /api/v1/categories/:id: a field left out
// is kept as it is.
type categoryPatchBody struct {
	Name            *string    `json:"name"`
	Description     *string    `json:"description"`
	AutoEnable      *bool      `json:"auto_enable"`
	ExpectUpdatedAt *time.Time `json:"expect_updated_at"`
}

// APISave creates (POST) or changes (PATCH /:id: the fields given) a category.
func (h CategoriesHandler) APISave(c echo.Context) error {
	if id := c.Param("id"); id != "" {
		var in categoryPatchBody
		if _, err := bindJSONChange(c, &in, "expect_updated_at"); err != nil {
			return err
		}
		cat, err := h.Tools.PatchCategory(c.Request().Context(), ActorOf(c), id,
			tools.CategoryPatch{Name: in.Name, Description: in.Description, AutoEnable: in.AutoEnable, ExpectUpdatedAt: in.ExpectUpdatedAt})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, cat)
	}
	var in categoryBody
	if err := bindJSONCreate(c, &in); err != nil {
		return err
	}
	cat, err := h.Tools.SaveCategory(c.Request().Context(), ActorOf(c), "",
		tools.CategoryInput{Name: in.Name, Description: in.Description, AutoEnable: in.AutoEnable})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, cat)
}

// APIDelete removes a category.
func (h CategoriesHandler) APIDelete(c echo.Context) error {
	if err := h.Tools.DeleteCategory(c.Request().Context(), ActorOf(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
