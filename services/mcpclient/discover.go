package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// progressEvery throttles discovery.progress events of a long, many-page discovery.
const progressEvery = 500 * time.Millisecond

// maxDiscovery bounds one discovery, however the server pages: each page has its own
// timeout, but a server answering page after page just in time would otherwise keep
// one running for hours, and every other discovery of it waiting.
const maxDiscovery = 10 * time.Minute

// discoverNow lists every tool (and resource and prompt) of the live session and stores
// the result. Discoveries of one server run one at a time; one asked for while another
// runs waits for it, or until ctx ends (the person who asked gave up).
func (c *conn) discoverNow(ctx context.Context, trigger string, actor audit.Actor) (registry.DiscoveryResult, error) {
	select {
	case c.discovering <- struct{}{}:
	case <-ctx.Done():
		return registry.DiscoveryResult{}, fmt.Errorf("discovery of %s: waited for the one running: %w", c.cfg.Name, ctx.Err())
	}
	defer c.discoveryDone()
	return c.discoverLocked(ctx, trigger, actor)
}

// discoveryDone ends a discovery: one asked for while it ran (a list_changed) is
// scheduled now, rather than queued behind it.
func (c *conn) discoveryDone() {
	<-c.discovering
	if c.rediscover.Swap(false) && c.ctx != nil && c.ctx.Err() == nil {
		c.requestDiscovery("list_changed")
	}
}

// discoverLocked is discoverNow once it holds c.discovering.
func (c *conn) discoverLocked(ctx context.Context, trigger string, actor audit.Actor) (registry.DiscoveryResult, error) {
	ctx, cancel := context.WithTimeout(ctx, maxDiscovery)
	defer cancel()
	c.mu.Lock()
	s := c.sess
	errText := c.errText
	c.mu.Unlock()
	if s == nil {
		if errText != "" {
			return registry.DiscoveryResult{}, ErrNotConnected.Withf("%s (%s)", ErrNotConnected.Message, errText)
		}
		return registry.DiscoveryResult{}, ErrNotConnected
	}
	// Numbered before the server is asked, so that a list another replica began later
	// and stored first is not replaced by this one.
	seq, err := c.m.reg.ListingSeq(ctx)
	if err != nil {
		return registry.DiscoveryResult{}, fmt.Errorf("discovery of %s: numbering the listing: %w", c.cfg.Name, err)
	}
	d := registry.Discovery{Trigger: trigger, Actor: actor, StartedAt: time.Now(), Fingerprint: c.cfg.Fingerprint, Seq: seq}
	lastProgress := time.Now()
	lim := listLimits{maxPages: c.m.opts.MaxPages, timeout: c.timeout()}
	gen := s.tools.gen.Load()
	tools, pages, err := listToolsSkipping(ctx, s.cs, lim, func(pages, n int) {
		if time.Since(lastProgress) >= progressEvery {
			lastProgress = time.Now()
			if perr := c.m.reg.DiscoveryProgress(ctx, c.cfg.ServerID, trigger, pages, n); perr != nil {
				c.m.log.Warn("mcpclient: discovery progress", "server", c.cfg.Name, "err", perr)
			}
		}
	}, leftOut(&d, c.masker))
	d.Pages = pages
	if err != nil {
		err = c.mask(err) // the server's own words may carry its secret (an error page's text)
		c.recordFailure(ctx, d, err)
		err = fmt.Errorf("discovery of %s: %w", c.cfg.Name, err)
		if ctx.Err() == nil {
			// What the server sent (or did not send in time): its fault, not Toolwarden's.
			kind := fault.KindUpstream
			if errors.Is(err, ErrTimeout) {
				kind = fault.KindTimeout
			}
			return registry.DiscoveryResult{}, fault.Wrap(err, kind, "discovery_failed", err.Error()).About("server")
		}
		return registry.DiscoveryResult{}, err
	}
	logLeftOut(c.m.log, c.cfg.Name, d)
	d.Tools = tools
	if s.caps != nil && s.caps.Resources != nil {
		d.Resources = listResources(ctx, s.cs, lim)
	}
	if s.caps != nil && s.caps.Prompts != nil {
		d.Prompts = listPrompts(ctx, s.cs, lim)
	}
	maskListed(c.masker, &d)
	// What the session lists is what its calls run, whatever becomes of the store
	// (superseded, refused, failed): recorded first, so that a call landing between
	// the store and this record is not checked against the list before.
	d.Listed = registry.HashListing(d.Tools)
	s.tools.record(gen, hashesOf(d.Tools, d.Listed))
	res, err := c.m.reg.ApplyDiscovery(ctx, c.cfg.ServerID, d)
	if errors.Is(err, registry.ErrDiscoveryOvertaken) {
		// Not a failure: another session stored a list begun after this one, and that is
		// the server's list now (res says so). Whoever asked (a person's Discover, the
		// assistant, a list_changed) has its tools discovered.
		c.m.log.Info("mcpclient: discovery not stored: a newer listing was stored first", "server", c.cfg.Name, "trigger", trigger)
		return res, nil
	}
	if err != nil {
		if noRunToRecord(err) {
			return registry.DiscoveryResult{}, err
		}
		err = c.mask(refusedList(err))
		c.recordFailure(ctx, d, err)
		return registry.DiscoveryResult{}, err
	}
	c.m.log.Info("mcpclient: discovery", "server", c.cfg.Name, "trigger", trigger, "tools", res.Total,
		"added", res.Added, "updated", res.Updated, "removed", res.Removed, "pages", res.Pages)
	return res, nil
}

// noRunToRecord reports whether err, from ApplyDiscovery, needs no failed run
// from the caller: the registry stored one itself (a superseded list, too many tools),
// or the server was deleted (nowhere to store one). Every other failure, a fault too
// (a tool moved meanwhile on every attempt), is recorded by the caller, or the
// server's page would show its last successful run as if nothing had failed.
func noRunToRecord(err error) bool {
	return errors.Is(err, registry.ErrDiscoverySuperseded) || errors.Is(err, registry.ErrTooManyTools) ||
		errors.Is(err, registry.ErrNotFound)
}

// recordFailure stores discovery d as a failed run with err, so the server's page says
// why, whatever became of the request that asked for it.
func (c *conn) recordFailure(ctx context.Context, d registry.Discovery, err error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := c.m.reg.RecordDiscoveryFailure(wctx, c.cfg.ServerID, d, err); rerr != nil {
		c.m.log.Warn("mcpclient: record failed discovery", "server", c.cfg.Name, "err", rerr)
	}
}

// refusedList is err, an upstream fault when the database refused what the server sent
// (a data exception, or a value past one of its limits): the server's list, not
// Toolwarden, is at fault.
func refusedList(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !(strings.HasPrefix(pe.Code, "22") || pe.Code == "54000") {
		return err
	}
	return fault.Wrap(err, fault.KindUpstream, "discovery_refused", fmt.Sprintf(
		"the server's tool list could not be stored (%s); no tools changed: ask the server's author to fix what it lists",
		textcheck.Storable(pe.Message))).About("server")
}

// leftOut is the skip of listToolsSkipping for discovery d: it counts each tool left out
// and names the first few, masked by m. They are shown with the run: quoted, so a
// control character reads as its escape.
func leftOut(d *registry.Discovery, m *secrets.Masker) func(name, why string) {
	return func(name, why string) {
		if d.LeftOut++; len(d.LeftOutNames) < registry.MaxLeftOutNames {
			d.LeftOutNames = append(d.LeftOutNames, fmt.Sprintf("%s: %s", clipText(strconv.Quote(m.String(name)), maxListedName), why))
		}
	}
}

// logLeftOut logs the tools discovery d of server left out, if any.
func logLeftOut(log *slog.Logger, server string, d registry.Discovery) {
	if d.LeftOut > 0 {
		log.Warn("mcpclient: discovery left out tools whose names cannot be stored", "server", server,
			"count", d.LeftOut, "first", d.LeftOutNames)
	}
}

// listToolsSkipping follows nextCursor to the end. It fails rather than return a
// partial list: a repeated cursor, too many pages or any error means no list at all.
// Each page's tools are converted (toolDef marshals each one) on another goroutine
// while the next page is fetched. A tool whose name cannot be stored (badToolName) is
// left out and passed to skip (when not nil).
func listToolsSkipping(ctx context.Context, cs *mcp.ClientSession, lim listLimits, progress func(pages, tools int), skip func(name, why string)) ([]registry.ToolDef, int, error) {
	var pageDefs [][]registry.ToolDef
	var wg sync.WaitGroup
	var convOnce sync.Once
	var convErr error     // the first conversion that panicked
	var size atomic.Int64 // bytes of the definitions converted so far
	defer wg.Wait()
	seen := newCursorSet()
	cursor := ""
	pages, total := 0, 0
	for {
		if n := size.Load(); n > maxListBytes {
			return nil, pages, fmt.Errorf("tools/list: the definitions passed %d MiB after %d pages: stopped, no tools changed", maxListBytes>>20, pages)
		}
		pctx, cancel := context.WithTimeout(ctx, lim.pageTimeout())
		res, err := cs.ListTools(pctx, &mcp.ListToolsParams{Cursor: cursor})
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
				return nil, pages, fmt.Errorf("tools/list page %d: no answer within %s: %w", pages+1, lim.pageTimeout(), ErrTimeout)
			}
			return nil, pages, fmt.Errorf("tools/list page %d: %w", pages+1, err)
		}
		pages++
		listed := make([]*mcp.Tool, 0, len(res.Tools))
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			if why := badToolName(t.Name); why != "" {
				if skip != nil {
					skip(t.Name, why)
				}
				continue
			}
			listed = append(listed, t)
		}
		total += len(listed)
		defs := make([]registry.ToolDef, len(listed))
		pageDefs = append(pageDefs, defs)
		page := pages
		wg.Go(func() {
			// A tool that makes the conversion panic (a hostile server's) fails the
			// discovery, not the process.
			defer func() {
				if p := recover(); p != nil {
					convOnce.Do(func() { convErr = fmt.Errorf("tools/list page %d: converting a tool failed: %v", page, p) })
				}
			}()
			for i, t := range listed {
				defs[i] = toolDef(t)
				size.Add(int64(len(defs[i].Raw)))
			}
		})
		if progress != nil {
			progress(pages, total)
		}
		if res.NextCursor == "" {
			wg.Wait()
			if convErr != nil {
				return nil, pages, convErr
			}
			var out []registry.ToolDef
			for _, defs := range pageDefs {
				out = append(out, defs...)
			}
			return out, pages, nil
		}
		if err := lim.next(seen, res.NextCursor, pages); err != nil {
			return nil, pages, fmt.Errorf("tools/list %w, no tools changed", err)
		}
		if total > maxListedTools {
			return nil, pages, fmt.Errorf("tools/list: more than %d tools after %d pages: stopped, no tools changed", maxListedTools, pages)
		}
		cursor = res.NextCursor
	}
}

// What a listing may take, whatever the server sends: a hostile or broken one could
// page forever, answer never, or fill memory a page at a time.
const (
	maxListBytes   = 256 << 20 // tool definitions, as converted
	maxListedTools = 200_000
	maxCursor      = 4096 // bytes of one cursor
)

// listLimits bound one listing: how many pages, and how long each page may take.
type listLimits struct {
	maxPages int
	timeout  time.Duration // a page's; 0: 30 s
}

func (l listLimits) pageTimeout() time.Duration {
	if l.timeout > 0 {
		return l.timeout
	}
	return 30 * time.Second
}

// next checks a page's next cursor before it is followed: not too long, not one seen
// already (an endless loop), not past the page limit; seen records it.
func (l listLimits) next(seen *cursorSet, cursor string, pages int) error {
	switch {
	case len(cursor) > maxCursor:
		return fmt.Errorf("gave a cursor of %d bytes after %d pages (at most %d): stopped", len(cursor), pages, maxCursor)
	case seen.has(cursor):
		return fmt.Errorf("repeated cursor %q after %d pages: stopped to avoid an endless loop", cursor, pages)
	case pages >= l.maxPages:
		return fmt.Errorf("still paging after %d pages: stopped", pages)
	}
	seen.add(cursor)
	return nil
}

// cursorSet is the cursors one listing followed, each kept as a 64-bit hash under a
// seed of the listing's own rather than as itself: Options.MaxPages (10,000) cursors
// of maxCursor bytes would hold 40 MiB, outside every byte budget of the listing. A
// server cannot aim for a collision without the seed; a chance one (under 1 in 10^11
// at 10,000 pages) ends the listing as a loop would.
type cursorSet struct {
	seed maphash.Seed
	seen map[uint64]struct{}
}

func newCursorSet() *cursorSet {
	return &cursorSet{seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

func (s *cursorSet) has(cursor string) bool {
	_, ok := s.seen[maphash.String(s.seed, cursor)]
	return ok
}

func (s *cursorSet) add(cursor string) { s.seen[maphash.String(s.seed, cursor)] = struct{}{} }

// toolDef is t as stored, its NULs replaced (textcheck.Storable, StorableJSON).
func toolDef(t *mcp.Tool) registry.ToolDef {
	raw := textcheck.StorableJSON(mustJSON(t))
	d := registry.ToolDef{Name: t.Name, Title: textcheck.Storable(t.Title), Description: textcheck.Storable(t.Description), Raw: raw}
	if d.Title == "" && t.Annotations != nil {
		d.Title = textcheck.Storable(t.Annotations.Title)
	}
	// The parts are the bytes the whole tool was just encoded to: encoding the schema
	// a second time was a sixth of a large discovery's CPU.
	part := func(name string, v any) json.RawMessage {
		if b := member(raw, name); b != nil {
			return b
		}
		return textcheck.StorableJSON(mustJSON(v))
	}
	if t.InputSchema != nil {
		d.InputSchema = part("inputSchema", t.InputSchema)
	}
	if t.OutputSchema != nil {
		d.OutputSchema = part("outputSchema", t.OutputSchema)
	}
	if t.Annotations != nil {
		d.Annotations = part("annotations", t.Annotations)
	}
	return d
}

// member returns the bytes of the top-level member name of the JSON object raw (a
// slice of raw), or nil.
func member(raw []byte, name string) json.RawMessage {
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	for dec.PeekKind() == '"' {
		key, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if key.String() != name {
			if dec.SkipValue() != nil {
				return nil
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		return raw[start:end:end]
	}
	return nil
}

// maskListed hides the server's secret values (its headers, environment, token) in what
// it says of its tools, resources and prompts, as the gateway does when it passes them
// on: they are stored, shown on the server's page and in the API, and tools are listed
// to agents. For resources and prompts it then replaces NULs (which PostgreSQL cannot
// store) and shortens each text (masked first, so a cut cannot leave part of a secret
// unmasked); toolDef already made tools storable. Masking is the same each time, so a
// tool's definition hash stays the same from one discovery to the next.
func maskListed(m *secrets.Masker, d *registry.Discovery) {
	for i := range d.Tools {
		maskTool(m, &d.Tools[i])
	}
	for i := range d.Resources {
		r := &d.Resources[i]
		r.URI, r.Name, r.Title, r.Description, r.MIMEType = textcheck.Storable(m.String(r.URI)), textcheck.Storable(m.String(r.Name)), textcheck.Storable(m.String(r.Title)),
			textcheck.Storable(m.String(r.Description)), textcheck.Storable(m.String(r.MIMEType))
		*r = shortResource(*r)
	}
	for i := range d.Prompts {
		p := &d.Prompts[i]
		p.Name, p.Title, p.Description = textcheck.Storable(m.String(p.Name)), textcheck.Storable(m.String(p.Title)), textcheck.Storable(m.String(p.Description))
		for j, a := range p.Arguments {
			p.Arguments[j] = textcheck.Storable(m.String(a))
		}
		*p = shortPrompt(*p)
	}
}

// maskTool masks t's title, description, schemas, annotations and the whole tool as
// received. Its name is left: it is what the tool is called, and masking could make two
// tools one. A tool whose whole holds no secret holds none in its parts (cut from the
// whole, or encoded from the same values), and is left as it is.
func maskTool(m *secrets.Masker, t *registry.ToolDef) {
	raw := m.JSON(t.Raw)
	if len(raw) > 0 && bytes.Equal(raw, t.Raw) {
		return
	}
	t.Raw = raw
	t.Title, t.Description = m.String(t.Title), m.String(t.Description)
	t.InputSchema, t.OutputSchema, t.Annotations = m.JSON(t.InputSchema), m.JSON(t.OutputSchema), m.JSON(t.Annotations)
}

// What discovery stores of a server's resources and prompts: they live in its row and
// are read with it on every page load and status change, so each is bounded. A real
// server's lists are far inside these (descriptions of a few lines, tens of items).
const (
	maxListedExtras = 1000    // items of each list
	maxStoredList   = 1 << 20 // bytes of each list as stored (JSON)
	maxListedText   = 4 << 10 // a description
	maxListedName   = 200     // a name, title, MIME type or argument name
	maxListedArgs   = 100     // a prompt's arguments
	// A resource whose URI is longer (PATH_MAX), or a prompt whose name is, is left out:
	// cut, it would no longer name what it listed.
	maxListedURI = 4096
)

// cutMark ends a text Toolwarden shortened.
const cutMark = registry.CutMark

func clipText(s string, n int) string { return textcheck.Clip(s, n, cutMark) }

// shortResource is r as stored: its texts shortened (its URI is never cut).
func shortResource(r registry.Resource) registry.Resource {
	r.Name, r.Title, r.MIMEType = clipText(r.Name, maxListedName), clipText(r.Title, maxListedName), clipText(r.MIMEType, maxListedName)
	r.Description = clipText(r.Description, maxListedText)
	return r
}

// shortPrompt is p as stored: its texts shortened, at most maxListedArgs arguments
// (then "…"). Its name is never cut.
func shortPrompt(p registry.Prompt) registry.Prompt {
	p.Title, p.Description = clipText(p.Title, maxListedName), clipText(p.Description, maxListedText)
	if p.Arguments != nil {
		args := make([]string, 0, min(len(p.Arguments), maxListedArgs+1))
		for i, a := range p.Arguments {
			if i == maxListedArgs {
				args = append(args, "…")
				break
			}
			args = append(args, clipText(a, maxListedName))
		}
		p.Arguments = args
	}
	return p
}

// listResources returns the server's resources, or nil when listing fails (recorded
// as "not listed", never as "no resources"): bounded as listSome says, each page
// bounded in time, entries the server sent as null skipped. Resources with no URI or
// one over maxListedURI are left out. A list that was cut, or had some left out, ends
// with an entry without a URI whose description says so (shown last on the page).
func listResources(ctx context.Context, cs *mcp.ClientSession, lim listLimits) []registry.Resource {
	leftOut := 0
	out, cut := listSome(ctx, lim, func(ctx context.Context, cursor string) ([]registry.Resource, string, error) {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		out := make([]registry.Resource, 0, len(res.Resources))
		for _, r := range res.Resources {
			switch {
			case r == nil:
			case r.URI == "" || len(r.URI) > maxListedURI:
				leftOut++
			default:
				out = append(out, registry.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
			}
		}
		return out, res.NextCursor, nil
	}, shortResource)
	if note := cutNote(cut, leftOut, "resources", "URI"); out != nil && note != "" {
		out = append(out, registry.Resource{Description: note})
	}
	return out
}

// listPrompts is listResources for prompts: those with no name or one over
// maxListedURI are left out, and the entry that says the list was cut has no name.
func listPrompts(ctx context.Context, cs *mcp.ClientSession, lim listLimits) []registry.Prompt {
	leftOut := 0
	out, cut := listSome(ctx, lim, func(ctx context.Context, cursor string) ([]registry.Prompt, string, error) {
		res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		out := make([]registry.Prompt, 0, len(res.Prompts))
		for _, p := range res.Prompts {
			if p == nil {
				continue
			}
			if p.Name == "" || len(p.Name) > maxListedURI {
				leftOut++
				continue
			}
			pr := registry.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
			for _, a := range p.Arguments {
				if a != nil {
					pr.Arguments = append(pr.Arguments, a.Name)
				}
			}
			out = append(out, pr)
		}
		return out, res.NextCursor, nil
	}, shortPrompt)
	if note := cutNote(cut, leftOut, "prompts", "name"); out != nil && note != "" {
		out = append(out, registry.Prompt{Description: note})
	}
	return out
}

// cutNote says why a stored list is not the server's whole list, or "".
func cutNote(cut string, leftOut int, kind, key string) string {
	var parts []string
	if cut != "" {
		parts = append(parts, cut)
	}
	if leftOut > 0 {
		parts = append(parts, fmt.Sprintf("%d left out, with no %s or one over %d bytes", leftOut, key, maxListedURI))
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + kind + " list cut: " + strings.Join(parts, "; ") + ")"
}

// listSome follows page's cursors to the end, or until maxListedExtras items, or the
// items as stored (short gives an item as stored) pass maxStoredList bytes, or as the
// server sent them MaxListedBytes (what is held until they are shortened). It returns
// nil when a page fails or the cursors misbehave; else the items kept and, when it
// stopped before the end, why.
func listSome[T any](ctx context.Context, lim listLimits, page func(context.Context, string) ([]T, string, error), short func(T) T) ([]T, string) {
	out := []T{}
	seen := newCursorSet()
	cursor := ""
	size, stored := 0, 0
	for pages := 1; ; pages++ {
		pctx, cancel := context.WithTimeout(ctx, lim.pageTimeout())
		items, next, err := page(pctx, cursor)
		cancel()
		if err != nil {
			return nil, ""
		}
		for _, it := range items {
			if len(out) == maxListedExtras {
				return out, fmt.Sprintf("the server listed more than %d; the first %d are kept", maxListedExtras, len(out))
			}
			if size += len(mustJSON(it)); size > MaxListedBytes {
				return out, fmt.Sprintf("the server sent more than %d MiB; the first %d are kept", MaxListedBytes>>20, len(out))
			}
			if stored += len(mustJSON(short(it))); stored > maxStoredList {
				return out, fmt.Sprintf("the list passed %d MiB; the first %d are kept", maxStoredList>>20, len(out))
			}
			out = append(out, it)
		}
		if next == "" {
			return out, ""
		}
		if lim.next(seen, next, pages) != nil {
			return nil, ""
		}
		cursor = next
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// maxToolName bounds a tool name discovery stores, in bytes: well past MCP's 128
// characters (a longer name is stored, and the validator marks the tool invalid), well
// inside the ~2.7 KB PostgreSQL's index on (server_id, name) can hold.
const maxToolName = 1024

// badToolName says why a tool named name cannot be stored, or "": over maxToolName, or
// holding a control character (a NUL, which PostgreSQL refuses; the
// others would make a name people cannot read or type).
func badToolName(name string) string {
	switch {
	case len(name) > maxToolName:
		return fmt.Sprintf("a name of %d bytes (at most %d)", len(name), maxToolName)
	case !utf8.ValidString(name):
		return "a name that is not UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "a control character in its name"
	}
	return ""
}
