package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// lazyWriter sends the answer's status with its first bytes, so that an error before
// any is still the error handler's to answer (a page or JSON of its own). One after them
// can only break the transfer (abort): ended cleanly, the answer would be cut at an
// arbitrary byte and look complete.
type lazyWriter struct {
	res    *echo.Response
	status int
	// contentType, when set, is set with the status (an error answered instead has its own).
	contentType string
	// flush sends each write at once (a download the client sees grow); a client that
	// stops reading then fails the write at the server's write deadline
	// (web.writeDeadline, DownloadStall) instead of filling buffers.
	flush   bool
	started bool
}

func (w *lazyWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.started = true
		if w.contentType != "" {
			w.res.Header().Set(echo.HeaderContentType, w.contentType)
		}
		w.res.WriteHeader(w.status)
	}
	n, err := w.res.Write(b)
	if err == nil && w.flush {
		err = http.NewResponseController(w.res).Flush()
	}
	return n, err
}

// finish sends the status of an answer that wrote nothing.
func (w *lazyWriter) finish() {
	if !w.started {
		w.started = true
		w.res.WriteHeader(w.status)
	}
}
