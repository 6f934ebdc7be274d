package views

import (
	"strings"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/views/form"
)

// formOperationAttrs mark a consolidated tool's fields: the operation select, and the
// operations each other field is a parameter of (app.js shows the chosen one's only).
func formOperationAttrs(f form.Field) templ.Attributes {
	switch {
	case f.OperationSelect:
		return templ.Attributes{"data-operation-select": ""}
	case len(f.Operations) > 0:
		return templ.Attributes{"data-operations": strings.Join(f.Operations, " ")}
	}
	return nil
}
