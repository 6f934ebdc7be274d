package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/internal/replicahop"
)

// remoteRuns reaches the test runs other replicas hold (handlers.RemoteRuns), for a
// page's socket on this replica that follows one: it asks the replica whose run it is
// (GET /internal/v1/testruns/:call…, signed as a replica hop; web/run_forward.go).
type remoteRuns struct{ a *App }

// runClient asks other replicas about their test runs; a watch has no timeout of its
// own (it lasts while the socket follows the run).
var runClient = &http.Client{}

// get sends a signed GET for path to replica, bounded by ctx.
func (r remoteRuns) get(ctx context.Context, replica, path string) (*http.Response, error) {
	owner, err := r.a.Replicas.GetByID(ctx, replica)
	if err != nil {
		return nil, err
	}
	if owner.Address == "" {
		return nil, fmt.Errorf("replica %s has no address other replicas reach it at (--advertise-url)", owner.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(owner.Address, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	replicahop.SignRequest(r.a.Keys, replicahop.Hop{From: r.a.Replicas.Name(), To: owner.ID}, req, nil, r.a.Replicas.Now())
	return runClient.Do(req)
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
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	return string(b), err
}

// Watch holds a request open at the run's replica while the socket follows the run,
// and opens it again (after a second) when it ends before the run does.
func (r remoteRuns) Watch(replica, id string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			res, err := r.get(ctx, replica, runPath(id, "/watch"))
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
				res.Body.Close()
				if res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotFound {
					return // the run ended, or is not kept there
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return cancel
}
