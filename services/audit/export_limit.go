package audit

import (
	"fmt"
	"sync"
	"time"

	"github.com/toolwarden/toolwarden/services/fault"
)

// Limits on exports running at once. Each reads the whole log and waits on its
// client between batches: one person (whatever tokens they use) gains nothing from a
// second at once, and a few people's downloads must not take the process's time and
// the database's for everyone else.
const (
	maxExportsPerPerson = 1
	maxExports          = 3
	// exportBusyRetry is the Retry-After of a refused export.
	exportBusyRetry = time.Minute
)

// exportCount is the exports running, in all and by person (exportPerson).
type exportCount struct {
	total  int
	people map[string]int
}

// exportPerson is who an export counts against: a person, whether signed in or by
// one of their tokens; otherwise the actor as named.
func exportPerson(a Actor) string {
	if (a.Kind == ActorUser || a.Kind == ActorToken) && a.ID != "" {
		return "user:" + a.ID
	}
	return a.Kind + ":" + a.Name
}

// admitExport takes a slot for an export by actor, or refuses at once (rate limited,
// with a wait) past the limits; release gives the slot back.
func (l *Log) admitExport(actor Actor) (release func(), err error) {
	who := exportPerson(actor)
	l.exportsMu.Lock()
	defer l.exportsMu.Unlock()
	c := &l.exports
	switch {
	case c.people[who] >= maxExportsPerPerson:
		return nil, fault.RateLimited("an export of yours is already running: wait for it to finish", exportBusyRetry)
	case c.total >= maxExports:
		return nil, fault.RateLimited(fmt.Sprintf("%d exports are running: try again in a minute", maxExports), exportBusyRetry)
	case c.people == nil:
		c.people = map[string]int{}
	}
	c.total++
	c.people[who]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.exportsMu.Lock()
			defer l.exportsMu.Unlock()
			if c.people[who]--; c.people[who] == 0 {
				delete(c.people, who)
			}
			c.total--
		})
	}, nil
}
