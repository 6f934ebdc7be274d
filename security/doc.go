// Package security holds Toolwarden's security suite: one test per finding of the
// attack on the running product (issue #17), a walk of every route as every role, as
// an API token and anonymously, and a catalogue (catalogue_test.go) that names, for
// every checkable security behaviour, the tests that prove it wherever they live, and
// fails when one of them no longer exists. Everything runs in `make test`; the fuzz
// targets run longer with `make fuzz`. docs/security.md describes the behaviours.
package security
