package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
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
	return h.render(c, http.StatusOK, "", views.CategoryForm{}, nil)
}

func (h CategoriesHandler) render(c echo.Context, status int, editID string, form views.CategoryForm, errs views.FormErrors) error {
	list, err := h.Tools.Categories(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.CategoriesPage{Layout: h.layout(c, "Tool categories"), Form: form, Errors: errs, EditID: editID,
		CanEdit: PrincipalOf(c).Can(auth.PermToolConfigure)}
	for _, cat := range list {
		v.Categories = append(v.Categories, views.CategoryRow{ID: cat.ID, Name: cat.Name, Description: cat.Description,
			AutoEnable: cat.AutoEnable, Tools: cat.Tools})
	}
	return render(c, status, views.Categories(v))
}

func categoryInput(c echo.Context) tools.CategoryInput {
	return tools.CategoryInput{Name: c.FormValue("name"), Description: c.FormValue("description"),
		AutoEnable: c.FormValue("auto_enable") != ""}
}

// Save creates a category (POST /tools/categories) or changes one (POST /tools/categories/:id).
func (h CategoriesHandler) Save(c echo.Context) error {
	in := categoryInput(c)
	cat, err := h.Tools.SaveCategory(c.Request().Context(), ActorOf(c), c.Param("id"), in)
	var ve *verr.Error
	if errors.As(err, &ve) {
		form := views.CategoryForm{Name: in.Name, Description: in.Description, AutoEnable: in.AutoEnable}
		errs := views.FormErrors{}
		for _, f := range ve.Fields {
			errs[f.Field] = f.Message
		}
		return h.render(c, http.StatusUnprocessableEntity, c.Param("id"), form, errs)
	}
	return h.redirectWithOutcome(c, err, func() string { return "Category " + cat.Name + " saved." }, "/tools/categories")
}

// Delete removes a category; its tools stay, without one.
func (h CategoriesHandler) Delete(c echo.Context) error {
	err := h.Tools.DeleteCategory(c.Request().Context(), ActorOf(c), c.Param("id"))
	return h.redirectWithOutcome(c, err, func() string { return "Category deleted; its tools have no category now." }, "/tools/categories")
}

// categoryBody is the JSON body of POST/PATCH /api/v1/categories.
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

// APISave creates (POST) or replaces (PATCH /:id) a category.
func (h CategoriesHandler) APISave(c echo.Context) error {
	var in categoryBody
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	cat, err := h.Tools.SaveCategory(c.Request().Context(), ActorOf(c), c.Param("id"),
		tools.CategoryInput{Name: in.Name, Description: in.Description, AutoEnable: in.AutoEnable})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if c.Param("id") == "" {
		status = http.StatusCreated
	}
	return c.JSON(status, cat)
}

// APIDelete removes a category.
func (h CategoriesHandler) APIDelete(c echo.Context) error {
	if err := h.Tools.DeleteCategory(c.Request().Context(), ActorOf(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
