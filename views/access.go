package views

// ToolAccessURL is the Access tab of tool id: a page of its own, like the test panel.
func ToolAccessURL(id string) string { return "/tools/" + id + "/access" }

// ToolAccess is the Access tab: who may call the tool by role, the rules for single
// users that win over their role, and the form that adds, changes or removes one.
type ToolAccess struct {
	Action string // where the form and the Remove buttons post
	Roles  []AccessRole
	Rules  []AccessRule
	// CanEdit: the viewer may change the rules (users.manage); others read them.
	CanEdit bool
	// Users are the usernames the form suggests (filled only when CanEdit).
	Users  []string
	Form   AccessForm
	Errors FormErrors
	// Notice says what the last change did (an htmx answer has no flash).
	Notice string
}

// AccessRole is one role and whether it may call the tool by itself (tool.use).
type AccessRole struct {
	Role   string
	Label  string
	CanUse bool
}

// AccessRule is one user's override.
type AccessRule struct {
	Username  string
	Role      string
	RoleLabel string
	CanUse    bool
	// RoleCanUse is what the user's role alone would decide.
	RoleCanUse bool
}

// Redundant reports whether the rule says what the role says anyway; it still matters
// if the user's role changes later.
func (r AccessRule) Redundant() bool { return r.CanUse == r.RoleCanUse }

// AccessForm is what the form held, to show it again next to its errors.
type AccessForm struct {
	Username string
	Access   string // allow, deny, or role (remove the rule)
}

// The values of the form's access field.
const (
	AccessAllow  = "allow"
	AccessDeny   = "deny"
	AccessByRole = "role" // the role decides: the rule is removed
)
