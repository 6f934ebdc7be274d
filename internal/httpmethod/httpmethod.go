// Package httpmethod bounds what is kept of a request's method. Go's server accepts any
// token as a method, of any length up to its header limit, before anyone is
// authenticated: a metrics label or an audit entry that took it as sent would let an
// anonymous client add series or bytes without end.
package httpmethod

import "net/http"

// Other stands for every method outside the standard ones.
const Other = "OTHER"

// Label is m when it is one of the standard methods (RFC 9110 and PATCH), else Other.
func Label(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return Other
}
