package registry

// SetMaxToolsPerServer lowers the tool cap of every Service until the returned func
// restores it. Tests calling it must not be parallel.
func SetMaxToolsPerServer(n int) (restore func()) {
	was := maxToolsPerServer
	maxToolsPerServer = n
	return func() { maxToolsPerServer = was }
}
