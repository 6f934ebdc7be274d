package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's password storage cheat sheet recommends at least
// m=19 MiB, t=2, p=1; we use 19 MiB and t=3 (a bit stronger, about 30 ms here).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 3
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// HashPassword hashes pw with argon2id into the PHC string format
// $argon2id$v=19$m=...,t=...,p=...$<salt>$<hash>.
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

var b64 = base64.RawStdEncoding

// errBadHash means a stored hash is not in the format HashPassword writes.
var errBadHash = errors.New("auth: malformed password hash")

// VerifyPassword reports whether pw matches the PHC-format hash, using the parameters
// stored in the hash (so raising the defaults does not lock anyone out).
func VerifyPassword(hash, pw string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 {
		return false, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is verified against when a username does not exist, so a failed sign-in
// takes as long whether or not the account exists. Made on first use: hashing costs
// ~30 ms, which every command and test binary would otherwise pay at start-up.
var dummyHash = sync.OnceValue(func() string {
	h, _ := HashPassword("toolwarden-dummy-password")
	return h
})

// Password rules.
const (
	MinPasswordLength = 12
	MaxPasswordLength = 256
)

// checkPassword returns why pw is not acceptable for username, or "".
func checkPassword(username, pw string) string {
	switch {
	case len([]rune(pw)) < MinPasswordLength:
		return fmt.Sprintf("must be at least %d characters", MinPasswordLength)
	case len(pw) > MaxPasswordLength:
		return fmt.Sprintf("must be at most %d bytes", MaxPasswordLength)
	case strings.EqualFold(strings.TrimSpace(pw), username):
		return "must not be the username"
	}
	return ""
}

// GeneratePassword returns a random 26-character base32 password (128 bits).
func GeneratePassword() string { return rand.Text() }
