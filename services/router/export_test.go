package router

// SetRunLimits sets how many ended runs rs keeps per owner and in all.
func SetRunLimits(rs *Runs, perOwner, total int) {
	rs.mu.Lock()
	rs.perOwner, rs.total = perOwner, total
	rs.mu.Unlock()
}

// SetRunBudget sets the bytes of ended runs' results rs keeps in all, and returns the
// bytes it keeps now.
func SetRunBudget(rs *Runs, budget int) (kept func() int) {
	rs.mu.Lock()
	rs.budget = budget
	rs.mu.Unlock()
	return func() int {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return rs.bytes
	}
}
