package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// remoteRuns reaches the test runs other replicas hold (handlers.RemoteRuns), for a
// page's socket on this replica that follows one: it asks the replica whose run it is
// (GET /internal/v1/testruns/:call…, signed as a replica hop; web/run_forward.go).
type remoteRuns struct{ a *App }

// runClient asks other replicas about their test runs (replicahop.Transport: bounded
// waits, no proxy); watchClient holds a watch, which has no timeout of its own (it
// lasts while the socket follows the run).
var (
	runClient   = &http.Client{Transport: replicahop.Transport, CheckRedirect: noRedirect}
	watchClient = &http.Client{Transport: replicahop.HeldTransport, CheckRedirect: noRedirect}
)

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// get sends a signed GET for path to replica, bounded by ctx.
func (r remoteRuns) get(ctx context.Context, replica, path string) (*http.Response, error) {
	return r.send(ctx, runClient, replica, path)
}

func (r remoteRuns) send(ctx context.Context, client *http.Client, replica, path string) (*http.Response, error) {
	owner, err := r.a.Replicas.GetByID(ctx, replica)
	if err != nil {
		return nil, err
	}
	req, err := r.a.replicaRequest(ctx, owner, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}

func runPath(id, what string) string { return "/internal/v1/testruns/" + url.PathEscape(id) + what }

func (r remoteRuns) Owner(ctx context.Context, replica, id string) (string, error) {
	res, err := r.get(ctx, replica, runPath(id, ""))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("test run %s on replica %s: %s", id, replica, res.Status)
	}
	var out struct {
		Owner string `json:"owner"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&out); err != nil {
		return "", err
	}
	return out.Owner, nil
}

func (r remoteRuns) Parts(ctx context.Context, replica, id string, eventID int64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := r.get(ctx, replica, runPath(id, "/parts?event="+strconv.FormatInt(eventID, 10)))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return "", nil
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("test run %s on replica %s: %s", id, replica, res.Status)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		return "", fmt.Errorf("test run %s on replica %s: answered %q, not HTML", id, replica, ct)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxRunFragment+1))
	if err == nil && len(b) > maxRunFragment {
		err = fmt.Errorf("test run %s on replica %s: its fragment is over %d bytes", id, replica, maxRunFragment)
	}
	return string(b), err
}

// maxRunFragment bounds a run's fragment another replica renders. A run keeps at most
// 4 MiB of its result (router.Runs), but as escaped HTML it can be larger: then the page
// is told its socket does not follow the run, and asks that replica (handlers.Live).
const maxRunFragment = 4 << 20

// Watch holds a request open at the run's replica while the socket follows the run,
// and opens it again (after a second) when it ends before the run does. When that
// replica is gone, or keeps failing, the run is announced ended on its topic: its
// result will never come, and the pages following it ask instead (the fragment of an
// event of a run no replica renders says so; handlers.Live).
func (r remoteRuns) Watch(replica, id string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	held, retry := watchHeld, watchRetry
	go func() {
		failed := 0
		for ctx.Err() == nil {
			// sent is when the request was sent, after began, plus one (0: not sent); the
			// transport's goroutine says so.
			began := time.Now()
			var sent atomic.Int64
			actx, endWatch := r.whileAlive(ctx, replica)
			wctx := httptrace.WithClientTrace(actx, &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { sent.Store(int64(time.Since(began)) + 1) }})
			res, err := r.send(wctx, watchClient, replica, runPath(id, "/watch"))
			endWatch()
			switch {
			case context.Cause(actx) == errReplicaGone, errors.Is(err, replicas.ErrGone) && r.a.Replicas.Steady():
				// (Not steady: every replica looks gone; it counts as a failure.)
				r.ended(replica, id)
				return
			case err == nil:
				_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusNoContent:
					return // the run ended (its own event says so)
				case http.StatusNotFound:
					r.ended(replica, id) // not kept there (its replica restarted)
					return
				}
			}
			if ctx.Err() == nil {
				// A watch held open a while reached the replica holding the run (it answers
				// at once otherwise): what cut it then (a proxy's idle timeout) is no sign
				// of the run being lost, so only the failures since count.
				if at := sent.Load(); at != 0 && time.Since(began)-time.Duration(at-1) >= held {
					failed = 0
				}
				if failed++; failed >= maxWatchFailures {
					r.ended(replica, id)
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}()
	return cancel
}

// whileAlive is ctx, cancelled with errReplicaGone once replica stops beating while
// this one beats steadily: a watch held open at a replica whose host died or was cut
// off gets no answer and no reset, and would wait minutes for TCP to give up. end stops
// the checks.
func (r remoteRuns) whileAlive(ctx context.Context, replica string) (_ context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(r.a.Replicas.DeadAfter())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !r.a.Replicas.Alive(ctx, replica) && r.a.Replicas.Steady() {
					cancel(errReplicaGone)
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// errReplicaGone is whileAlive's cause: the replica stopped beating.
var errReplicaGone = errors.New("the replica stopped beating")

// maxWatchFailures is how many watches in a row may fail (a second apart, none held
// open for watchHeld) before the run is taken for lost.
const maxWatchFailures = 10

// watchRetry is how long a watch waits before asking again; watchHeld how long a
// watch must have been held open to show its replica holds the run (variables: tests
// shorten them).
var watchRetry, watchHeld = time.Second, 5 * time.Second

// ended announces on run id's topic that it ended where nobody can render it.
func (r remoteRuns) ended(replica, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := db.WithTx(ctx, r.a.Local.Beginner(r.a.Pool), func(tx pgx.Tx) error {
		_, err := events.RunEnded.Publish(ctx, tx, handlers.TestRunTopic(id, replica), events.RunRef{CallID: id})
		return err
	})
	if err != nil {
		r.a.log.Warn("announce a test run lost with its replica", "run", id, "replica", replica, "err", err)
	}
}
