package analytics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
)

// A person runs one report at a time (whatever token they use) and the process two:
// past either, a report is refused at once as rate limited (429 with Retry-After),
// and once a report ends its slot serves the next.
func TestReportAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := analytics.New(dbtest.New(t))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p := analytics.LastDays(now, 366)
	// Each admitted report says so and waits for release.
	admitted, release := make(chan struct{}, 16), make(chan struct{})
	svc.HoldAdmitted(func() { admitted <- struct{}{}; <-release })

	alice := audit.Actor{Kind: audit.ActorUser, ID: "11111111-1111-1111-1111-111111111111", Name: "alice"}
	aliceToken := audit.Actor{Kind: audit.ActorToken, ID: alice.ID, Name: "alice", TokenID: "t1"}
	bob := audit.Actor{Kind: audit.ActorUser, ID: "22222222-2222-2222-2222-222222222222", Name: "bob"}
	carol := audit.Actor{Kind: audit.ActorToken, ID: "33333333-3333-3333-3333-333333333333", Name: "carol", TokenID: "t3"}

	done := make(chan error, 2)
	run := func(a audit.Actor) {
		go func() { _, err := svc.ReportBy(ctx, a, p, now); done <- err }()
		<-admitted
	}
	refused := func(who string, a audit.Actor, says string) {
		t.Helper()
		_, err := svc.ReportBy(ctx, a, p, now)
		f, ok := fault.As(err)
		if !ok || f.Kind != fault.KindRateLimited || f.RetryAfter <= 0 || !strings.Contains(f.Message, says) {
			t.Fatalf("%s: %v, want rate limited with a wait, saying %q", who, err, says)
		}
	}
	run(alice)
	refused("alice's second report, by her token", aliceToken, "a report of yours is already running")
	refused("alice's second report", alice, "a report of yours is already running")
	run(bob)
	refused("carol's report beside two", carol, "2 reports are running")

	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []audit.Actor{aliceToken, carol} {
		if _, err := svc.ReportBy(ctx, a, p, now); err != nil {
			t.Fatalf("%s after the others ended: %v", a.Name, err)
		}
	}
	// A period that cannot be is refused as such, not counted.
	if _, err := svc.ReportBy(ctx, alice, analytics.Period{From: now, To: now.Add(-time.Hour)}, now); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("a reversed period: %v, want invalid", err)
	}
}

// A person's report waits a moment for their earlier one (a period they clicked away
// from ends within moments) rather than being refused at once.
func TestReportWaitsForTheSamePersonsEarlierOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := analytics.New(dbtest.New(t))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	admitted, release := make(chan struct{}, 4), make(chan struct{})
	svc.HoldAdmitted(func() { admitted <- struct{}{}; <-release })
	alice := audit.Actor{Kind: audit.ActorUser, ID: "11111111-1111-1111-1111-111111111111", Name: "alice"}
	first := make(chan error, 1)
	go func() { _, err := svc.ReportBy(ctx, alice, analytics.LastDays(now, 30), now); first <- err }()
	<-admitted
	waiting := make(chan struct{}, 1)
	svc.OnWaiting(func() { waiting <- struct{}{} })
	second := make(chan error, 1)
	go func() { _, err := svc.ReportBy(ctx, alice, analytics.LastDays(now, 90), now); second <- err }()
	<-waiting      // the second found the first's slot taken
	close(release) // and the first ends while it waits
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second report, asked while the first ran: %v, want it served once the first ended", err)
	}
}
