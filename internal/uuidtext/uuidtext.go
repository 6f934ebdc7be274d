// Package uuidtext checks ids given as text the way PostgreSQL writes a uuid. The uuid
// package also reads other spellings (upper case, braces, urn:uuid:, no hyphens), some
// of which PostgreSQL reads as the same row and some it refuses: an id in another
// spelling must name nothing, or the same row would be known by several keys (a second
// session of one server) or the query would fail as an internal error.
package uuidtext

import (
	"strings"

	"github.com/google/uuid"
)

// Canonical reports whether id is a uuid in its canonical text: 36 characters, lower
// case, hyphenated.
func Canonical(id string) bool {
	return len(id) == 36 && uuid.Validate(id) == nil && strings.ToLower(id) == id
}

// Canonicalize is id as PostgreSQL gives a uuid back (lower case, hyphenated), or id
// itself when it is no uuid: a value made from an id as given (a seal) then matches one
// made from the stored id.
func Canonicalize(id string) string {
	if u, err := uuid.Parse(id); err == nil {
		return u.String()
	}
	return id
}
