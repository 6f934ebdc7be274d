package registry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// uploadTTL bounds how long an import previewed in the browser can still be applied.
const uploadTTL = 30 * time.Minute

// ErrUploadExpired: the previewed import is too old, or belongs to someone else.
var ErrUploadExpired = errors.New("registry: this import preview expired or is not yours; upload the file again")

// SealUpload encrypts an uploaded configuration file so the browser can hold it between
// preview and apply: such files often carry API keys in env, which must never go back to
// the browser in readable form. The result is bound to the user and expires.
func (s *Service) SealUpload(userID, filename string, data []byte) (string, error) {
	// The name is length-prefixed (after a '/', which no earlier seal's name began
	// with): a newline in it must not move the rest of it into the file.
	plain := strconv.FormatInt(time.Now().Unix(), 10) + "\n/" + strconv.Itoa(len(filename)) + "\n" + filename + string(data)
	return s.keys.EncryptString(plain, "import/"+userID)
}

// OpenUpload returns the file sealed by SealUpload for the same user.
func (s *Service) OpenUpload(userID, sealed string) (filename string, data []byte, err error) {
	plain, err := s.keys.DecryptString(sealed, "import/"+userID)
	if err != nil {
		return "", nil, ErrUploadExpired
	}
	stamp, rest, ok := strings.Cut(plain, "\n")
	if !ok {
		return "", nil, ErrUploadExpired
	}
	rest, ok = strings.CutPrefix(rest, "/")
	size, rest, cut := strings.Cut(rest, "\n")
	n, nerr := strconv.Atoi(size)
	ok = ok && cut && nerr == nil && n >= 0 && n <= len(rest)
	sec, perr := strconv.ParseInt(stamp, 10, 64)
	if !ok || perr != nil || time.Since(time.Unix(sec, 0)) > uploadTTL {
		return "", nil, fmt.Errorf("%w (previews last %s)", ErrUploadExpired, uploadTTL)
	}
	return rest[:n], []byte(rest[n:]), nil
}
