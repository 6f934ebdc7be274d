package web

// SampleWakes is how many times s's sockets woke to send what they sample.
func SampleWakes(s *Server) int64 { return s.hub.sampleWakes.Load() }

// WSSampleEvery is how often at most a socket sends its sampled topics' events.
const WSSampleEvery = wsSampleEvery
