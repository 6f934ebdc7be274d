package configcode

// DropBaseForTest forgets what p was planned against, so that Apply's whole-plan check
// (unchanged) compares nothing: what is left to catch a definition changed since the
// plan is the apply's own check of the file's definition_hash.
func (p *Plan) DropBaseForTest() { p.base = nil }
