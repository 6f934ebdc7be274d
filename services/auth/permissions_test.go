package auth_test

import (
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
)

func TestRolesValid(t *testing.T) {
	t.Parallel()
	if got, want := len(auth.Roles), 5; got != want {
		t.Fatalf("roles: got %d, want %d (docs/security.md)", got, want)
	}
	for _, r := range auth.Roles {
		if !r.Valid() {
			t.Errorf("role %q: got Valid false, want true", r)
		}
		if r.Label() == "" || r.Label() == string(r) {
			t.Errorf("role %q: got label %q, want a human name", r, r.Label())
		}
	}
	for _, r := range []auth.Role{"", "root", "Admin", "admin ", "superuser"} {
		if r.Valid() {
			t.Errorf("role %q: got Valid true, want false", r)
		}
		for _, p := range auth.AllPermissions {
			if r.Can(p) {
				t.Errorf("unknown role %q: got Can(%s) true, want false", r, p)
			}
		}
	}
}

func TestAllPermissions(t *testing.T) {
	t.Parallel()
	seen := map[auth.Permission]bool{}
	for _, p := range auth.AllPermissions {
		if p == auth.PermPublic {
			t.Errorf("AllPermissions contains %q, want it left out", p)
		}
		if seen[p] {
			t.Errorf("AllPermissions lists %q twice", p)
		}
		seen[p] = true
	}
	// No role grants something AllPermissions does not know of.
	for _, r := range auth.Roles {
		for _, p := range r.Permissions() {
			if !seen[p] {
				t.Errorf("role %q grants %q, which is not in AllPermissions", r, p)
			}
		}
	}
}

func TestAdminCanEverything(t *testing.T) {
	t.Parallel()
	for _, p := range append([]auth.Permission{auth.PermPublic}, auth.AllPermissions...) {
		if !auth.RoleAdmin.Can(p) {
			t.Errorf("admin: got Can(%s) false, want true", p)
		}
	}
}

func TestRolePermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role auth.Role
		perm auth.Permission
		want bool
	}{
		{auth.RoleGuest, auth.PermDashboard, true},
		{auth.RoleGuest, auth.PermToolView, true},
		{auth.RoleGuest, auth.PermToolUse, false},
		{auth.RoleGuest, auth.PermUsers, false},
		{auth.RoleGuest, auth.PermAuditView, false},
		{auth.RoleGuest, auth.PermOwnTokens, false},
		{auth.RoleGuest, auth.PermServerCreate, false},

		{auth.RoleAuditor, auth.PermAuditView, true},
		{auth.RoleAuditor, auth.PermAuditExport, true},
		{auth.RoleAuditor, auth.PermMetricsView, true},
		{auth.RoleAdmin, auth.PermMetricsView, true},
		{auth.RoleToolManager, auth.PermMetricsView, false},
		{auth.RoleToolUser, auth.PermMetricsView, false},
		{auth.RoleGuest, auth.PermMetricsView, false},
		{auth.RoleAuditor, auth.PermLogView, true},
		{auth.RoleAuditor, auth.PermExecutionView, true},
		{auth.RoleAuditor, auth.PermExecutionApprove, false},
		{auth.RoleGuest, auth.PermExecutionView, false},
		{auth.RoleAuditor, auth.PermUsers, false},
		{auth.RoleAuditor, auth.PermServerCreate, false},
		{auth.RoleAuditor, auth.PermServerEdit, false},
		{auth.RoleAuditor, auth.PermToolUse, false},
		{auth.RoleAuditor, auth.PermToolConfigure, false},

		{auth.RoleToolUser, auth.PermToolUse, true},
		{auth.RoleToolUser, auth.PermExecutionCreate, true},
		{auth.RoleToolUser, auth.PermToolConfigure, false},
		{auth.RoleToolUser, auth.PermServerCreate, false},
		{auth.RoleToolUser, auth.PermAuditView, false},
		{auth.RoleToolUser, auth.PermUsers, false},

		{auth.RoleToolManager, auth.PermServerCreate, true},
		{auth.RoleToolManager, auth.PermServerDelete, true},
		{auth.RoleToolManager, auth.PermServerCommand, false},
		{auth.RoleAdmin, auth.PermServerCommand, true},
		{auth.RoleToolManager, auth.PermToolConfigure, true},
		{auth.RoleToolManager, auth.PermToolEnable, true},
		{auth.RoleToolManager, auth.PermUsers, false},
		{auth.RoleToolManager, auth.PermAuditView, false},
	} {
		if got := tc.role.Can(tc.perm); got != tc.want {
			t.Errorf("%s.Can(%s): got %v, want %v", tc.role, tc.perm, got, tc.want)
		}
	}
}

func TestOnlyAdminManagesUsers(t *testing.T) {
	t.Parallel()
	for _, r := range auth.Roles {
		if got, want := r.Can(auth.PermUsers), r == auth.RoleAdmin; got != want {
			t.Errorf("%s.Can(%s): got %v, want %v", r, auth.PermUsers, got, want)
		}
	}
}

func TestEveryRoleHasDashboard(t *testing.T) {
	t.Parallel()
	for _, r := range auth.Roles {
		if !r.Can(auth.PermDashboard) {
			t.Errorf("%s.Can(%s): got false, want true (every signed-in user sees the dashboard)", r, auth.PermDashboard)
		}
	}
}

func TestPublicForEveryone(t *testing.T) {
	t.Parallel()
	for _, r := range append(slices.Clone(auth.Roles), "", "unknown") {
		if !r.Can(auth.PermPublic) {
			t.Errorf("role %q: got Can(public) false, want true", r)
		}
		p := &auth.Principal{User: auth.User{Role: r}}
		if !p.Can(auth.PermPublic) {
			t.Errorf("principal with role %q: got Can(public) false, want true", r)
		}
	}
	var nobody *auth.Principal
	if !nobody.Can(auth.PermPublic) {
		t.Error("nil principal: got Can(public) false, want true")
	}
}

func TestNilPrincipalCannotDoAnything(t *testing.T) {
	t.Parallel()
	var nobody *auth.Principal
	if nobody.Can(auth.PermDashboard) {
		t.Errorf("nil principal: got Can(%s) true, want false", auth.PermDashboard)
	}
	for _, p := range auth.AllPermissions {
		if nobody.Can(p) {
			t.Errorf("nil principal: got Can(%s) true, want false", p)
		}
	}
}

// A principal may what its role grants, except that an API token never may what only a
// person may (decisions).
func TestPrincipalCanFollowsRole(t *testing.T) {
	t.Parallel()
	for _, r := range auth.Roles {
		for _, kind := range []string{"user", "token"} {
			p := &auth.Principal{User: auth.User{Username: "x", Role: r}, Kind: kind}
			for _, perm := range auth.AllPermissions {
				want := r.Can(perm) && !(kind == "token" && auth.PersonOnly(perm))
				if got := p.Can(perm); got != want {
					t.Errorf("%s principal with role %s: got Can(%s) %v, want %v", kind, r, perm, got, want)
				}
			}
		}
	}
}

func TestPermissionsIsACopy(t *testing.T) {
	t.Parallel()
	perms := auth.RoleGuest.Permissions()
	if len(perms) == 0 {
		t.Fatal("guest: got no permissions, want some")
	}
	perms[0] = auth.PermUsers
	if auth.RoleGuest.Can(auth.PermUsers) {
		t.Fatal("changing the slice Permissions returned changed the role's permissions")
	}
	admin := auth.RoleAdmin.Permissions()
	if !slices.Equal(admin, auth.AllPermissions) {
		t.Fatalf("admin permissions: got %v, want %v", admin, auth.AllPermissions)
	}
}

func TestSignedIn(t *testing.T) {
	t.Parallel()
	if slices.Contains(auth.AllPermissions, auth.PermSignedIn) {
		t.Errorf("AllPermissions contains %q, want it left out", auth.PermSignedIn)
	}
	for _, r := range auth.Roles {
		if !r.Can(auth.PermSignedIn) {
			t.Errorf("%s: got Can(%s) false, want true", r, auth.PermSignedIn)
		}
		if p := (&auth.Principal{User: auth.User{Role: r}}); !p.Can(auth.PermSignedIn) {
			t.Errorf("principal with role %s: got Can(%s) false, want true", r, auth.PermSignedIn)
		}
	}
	for _, r := range []auth.Role{"", "root"} {
		if r.Can(auth.PermSignedIn) {
			t.Errorf("unknown role %q: got Can(%s) true, want false", r, auth.PermSignedIn)
		}
	}
	var nobody *auth.Principal
	if nobody.Can(auth.PermSignedIn) {
		t.Errorf("nil principal: got Can(%s) true, want false", auth.PermSignedIn)
	}
}
