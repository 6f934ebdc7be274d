package web

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/writebound"
)

// bodyDeadline bounds the time a client may take to send a request's body (a minute
// unless d says otherwise), against clients that trickle bytes to hold connections. The
// deadline ends with the body: what follows (a stream the handler sends for as long as
// it lasts) is not bounded.
func bodyDeadline(d time.Duration) echo.MiddlewareFunc {
	if d <= 0 {
		d = time.Minute
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength == 0 { // no body (-1: one of unknown length)
				return next(c)
			}
			rc := http.NewResponseController(c.Response())
			if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
				return next(c) // not a connection that has deadlines (a test's recorder)
			}
			r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			return next(c)
		}
	}
}

// deadlineBody clears the connection's read deadline once its body is read to the end.
type deadlineBody struct {
	io.ReadCloser
	once  sync.Once
	clear func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.clear)
	}
	return n, err
}

// writeDeadline bounds each write and flush of a response by d (0: a minute;
// internal/writebound): a client that stops reading fails the write and frees the
// handler. What the server writes after the handler (the rest of its buffer) is bounded
// too, and Go's server lifts that deadline afterwards. The gateway lowers the bound of
// its own responses to its WriteTimeout (writebound.Within).
func writeDeadline(d time.Duration) echo.MiddlewareFunc {
	if d <= 0 {
		d = time.Minute
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res := c.Response()
			w, ok := writebound.New(res.Writer, d)
			if !ok {
				return next(c) // not a connection that has deadlines (a test's recorder)
			}
			res.Writer = w
			err := next(c)
			w.Finish()
			return err
		}
	}
}
