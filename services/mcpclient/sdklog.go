package mcpclient

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolwarden/toolwarden/internal/loglimit"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/usage"
)

// sdkLogMax bounds the message and each text value the SDK logs about a server: they
// quote what the server sent (a tool's name, an annotation), whose length it picks.
const sdkLogMax = 1024

// sdkLogBurst lines about one client may be logged at once, then one every
// sdkLogEvery: the SDK logs a line per invalid tool of a list, whose length a hostile
// server picks (up to 20,000 tools).
const (
	sdkLogBurst = 20
	sdkLogEvery = 3 * time.Second
)

// sdkLogger is log as given to the SDK's client and transport of a connection to
// server cfg: tagged with the server, its text masked as the server's other text is
// (its secret values, then credential-like words) and cut to sdkLogMax, its lines
// rate-limited (one budget for the connection).
func sdkLogger(log *slog.Logger, cfg registry.Connection) *slog.Logger {
	next := log.Handler().WithAttrs([]slog.Attr{slog.String("server", cfg.Name), slog.String("server_id", cfg.ServerID)})
	return slog.New(&maskHandler{next: next, clean: logCleaner(cfg), budget: loglimit.New(sdkLogEvery, sdkLogBurst)})
}

// logCleaner masks text of server cfg for the log (its secret values, then
// credential-like words) and cuts it to sdkLogMax.
func logCleaner(cfg registry.Connection) func(string) string {
	masker := maskerOf(cfg)
	return func(s string) string {
		return textcheck.Clip(textcheck.Storable(usage.RedactText(masker.String(s))), sdkLogMax, registry.CutMark)
	}
}

// maskHandler passes records on with their message and text values cleaned, as many
// as its budget allows.
type maskHandler struct {
	next   slog.Handler
	clean  func(string) string
	budget *loglimit.Budget // shared by the handlers WithAttrs and WithGroup derive
}

func (h *maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *maskHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, dropped := h.budget.Take()
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, "mcpclient: sdk: "+h.clean(r.Message), r.PC)
	if dropped > 0 {
		out.AddAttrs(slog.Int("lines_left_out_before", dropped))
	}
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *maskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	cleaned := make([]slog.Attr, len(as))
	for i, a := range as {
		cleaned[i] = h.attr(a)
	}
	return &maskHandler{next: h.next.WithAttrs(cleaned), clean: h.clean, budget: h.budget}
}

func (h *maskHandler) WithGroup(name string) slog.Handler {
	return &maskHandler{next: h.next.WithGroup(name), clean: h.clean, budget: h.budget}
}

// attr cleans a's text; numbers, times and the like pass as they are. Anything else
// (an error, a value of the SDK's) is logged as its text, cleaned.
func (h *maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.clean(v.String()))
	case slog.KindGroup:
		g := v.Group()
		cleaned := make([]slog.Attr, len(g))
		for i, ga := range g {
			cleaned[i] = h.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(cleaned...)}
	case slog.KindAny:
		return slog.String(a.Key, h.clean(fmt.Sprint(v.Any())))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
