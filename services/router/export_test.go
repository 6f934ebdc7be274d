package router

// SetRunLimits sets how many ended runs rs keeps per owner and in all.
func SetRunLimits(rs *Runs, perOwner, total int) {
	rs.mu.Lock()
	rs.perOwner, rs.total = perOwner, total
	rs.mu.Unlock()
}
