package memory

// SetLimits lowers the per-person limits for a test and returns what puts them back.
func SetLimits(notes, todos int) (restore func()) {
	n, t := notesCap, personTodosCap
	notesCap, personTodosCap = notes, todos
	return func() { notesCap, personTodosCap = n, t }
}

// SetBytesLimit lowers the bytes of notes a person may keep for a test and returns what
// puts it back.
func SetBytesLimit(n int64) (restore func()) {
	b := bytesCap
	bytesCap = n
	return func() { bytesCap = b }
}

// SetPruneBatch sets how many lists PruneTodos removes in a transaction for a test and
// returns what puts it back.
func SetPruneBatch(n int) (restore func()) {
	b := pruneBatch
	pruneBatch = n
	return func() { pruneBatch = b }
}
