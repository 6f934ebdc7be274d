package app

import (
	"context"
	"time"
)

// auditSearchEvery is how far the audit log's free-text index may fall behind the
// appends; a search never sees it behind (audit.Log.IndexSearch).
const auditSearchEvery = 500 * time.Millisecond

// indexAuditSearch keeps the audit log's free-text index close behind the appends, so a
// search seldom has entries to index before it reads. It runs in every replica: they
// take turns on a lock, and one that finds nothing to index costs a round trip.
func (a *App) indexAuditSearch(ctx context.Context) error {
	t := time.NewTicker(auditSearchEvery)
	defer t.Stop()
	failing := false
	for {
		_, err := a.AuditLog.IndexSearch(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			// Said once until it works again: the database being down is reported elsewhere.
			a.log.Warn("audit: search index not brought up to date; searches index what they need themselves", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
