package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// DiscoverOnce opens a throwaway session with server id as it is registered, lists its
// tools (and resources and prompts) and stores them as a discovery with trigger, then
// closes the session. It needs no Run: `toolwarden import` uses it to discover the
// servers a file registers before it applies their tools' settings, and so does the
// import API (the manager's own session may still be connecting). A running manager
// discovers the same server on connect; the registry serializes the two and the second
// finds nothing changed, or (begun first, stored second) is dropped for the newer list,
// which is no error here.
func (m *Manager) DiscoverOnce(ctx context.Context, id, trigger string, actor audit.Actor) (registry.DiscoveryResult, error) {
	cfg, err := m.reg.Connection(ctx, id)
	if err != nil {
		return registry.DiscoveryResult{}, err
	}
	bound := m.opts.TestTimeout
	if cfg.Timeout > bound {
		bound = cfg.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, 2*bound)
	defer cancel()
	stderr := newLineBuffer(50, 2048)
	// As conn.redact: the server picks its error's length and what is in it, and the
	// import's answer repeats it once per tool of the server.
	mask := redactor(cfg)
	redact := func(s string) string { return registry.ClipError(textcheck.Storable(mask(s))) }
	stderr.setRedact(redact)
	d := registry.Discovery{Trigger: trigger, Actor: actor, StartedAt: time.Now(), Fingerprint: cfg.Fingerprint}
	// As conn.discoverLocked: numbered before the server is asked.
	seq, err := m.reg.ListingSeq(ctx)
	if err != nil {
		return registry.DiscoveryResult{}, fmt.Errorf("discovery of %s: numbering the listing: %w", cfg.Name, err)
	}
	d.Seq = seq
	// A discovery that fails is a failed run on the server's page, as a session's is:
	// an import's output is gone once read.
	record := func(msg string) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := m.reg.RecordDiscoveryFailure(wctx, id, d, errors.New(msg)); rerr != nil {
			m.log.Warn("mcpclient: record failed discovery", "server", cfg.Name, "err", rerr)
		}
	}
	fail := func(err error) (registry.DiscoveryResult, error) {
		msg := redact(err.Error())
		record(msg)
		return registry.DiscoveryResult{}, fmt.Errorf("discovery of %s: %s", cfg.Name, msg)
	}
	ml := m.msgLimit(cfg)
	ep, err := newEndpoint(cfg, m.opts.InheritEnv, m.confiner, stderr, ml, m.templateOptions(), m.opts.Builtin, m.opts.Egress)
	if err != nil {
		return fail(err)
	}
	m.track(ep)
	cs, stop, err := connect(ctx, m.newClient(ml.sdk, nil), ep, cfg.Timeout)
	if err != nil {
		return fail(err)
	}
	s := &session{cs: cs, ep: ep, cancel: stop}
	defer s.close()
	lim := listLimits{maxPages: m.opts.MaxPages, timeout: cfg.Timeout}
	masker := maskerOf(cfg)
	tools, pages, err := listToolsSkipping(ctx, cs, lim, nil, leftOut(&d, masker))
	if err != nil {
		return fail(err)
	}
	logLeftOut(m.log, cfg.Name, d)
	d.Tools, d.Pages = tools, pages
	if caps := cs.InitializeResult().Capabilities; caps != nil {
		if caps.Resources != nil {
			d.Resources = listResources(ctx, cs, lim)
		}
		if caps.Prompts != nil {
			d.Prompts = listPrompts(ctx, cs, lim)
		}
	}
	maskListed(masker, &d)
	res, err := m.reg.ApplyDiscovery(ctx, id, d)
	if errors.Is(err, registry.ErrDiscoveryOvertaken) {
		// The manager's own session (connecting as the import registered the server)
		// stored a list begun after this one: the tools are discovered, as asked (res
		// is that list's).
		return res, nil
	}
	if err != nil && !noRunToRecord(err) {
		// As conn.discoverLocked: only the registry's own refusals and a deleted server
		// go without a run recorded here.
		err = refusedList(err)
		record(redact(err.Error()))
	}
	return res, err
}
