package builtin

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A preview may read 32 MiB of files and diff them, and one is computed for every plan
// made and every view of a failed execution's rollback (each page render, each live
// update, each GET …/rollback). The same plan, for the same person, over files whose
// size, times, inode and mode have not changed is answered from a small cache for a
// while, and at most maxPreviewing previews are computed at once on a replica: the
// others wait (as their request allows), so views cannot multiply the reads and the
// memory.
const (
	previewCacheSize = 32
	previewCacheFor  = 30 * time.Second
	maxPreviewing    = 2
)

type previewCache struct {
	once    sync.Once
	slots   chan struct{}
	mu      sync.Mutex
	entries []cachedPreview // oldest first
}

type cachedPreview struct {
	key, sig string
	at       time.Time
	out      []*FilePreview
}

// acquire waits for a place among the previews computed now.
func (c *previewCache) acquire(ctx context.Context) (release func(), err error) {
	c.once.Do(func() { c.slots = make(chan struct{}, maxPreviewing) })
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// get is the previews kept for key while its files' signature is still sig. The slice
// is the caller's; the previews are shared, and never changed.
func (c *previewCache) get(key, sig string) ([]*FilePreview, bool) {
	if sig == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.key == key && e.sig == sig && time.Since(e.at) < previewCacheFor {
			return slices.Clone(e.out), true
		}
	}
	return nil, false
}

// put keeps out for key and sig (its files' signature before it was computed, so a
// change while it was computed makes the next look compute it again).
func (c *previewCache) put(key, sig string, out []*FilePreview) {
	if sig == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e cachedPreview) bool {
		return e.key == key || time.Since(e.at) >= previewCacheFor
	})
	if len(c.entries) == previewCacheSize {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, cachedPreview{key: key, sig: sig, at: time.Now(), out: slices.Clone(out)})
}

// previewKey identifies a preview: the conversation, the person and the calls.
func previewKey(conversation, user string, calls []PreviewCall) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(conversation)
	field(user)
	for _, pc := range calls {
		field(pc.Tool)
		field(string(pc.Arguments))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// previewSig is the signature of the files a preview reads (by area and path): each
// one's size, change and modification times, inode and mode, or that it is absent. ""
// when one cannot be looked at (nothing is cached then).
func (s *Server) previewSig(files map[[2]string]int) string {
	keys := make([][2]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	h := sha256.New()
	for _, k := range keys {
		ar, ok := roots[k[0]]
		if !ok {
			var err error
			if ar, err = s.openArea(k[0]); err != nil {
				return ""
			}
			roots[k[0]] = ar
		}
		fmt.Fprintf(h, "%d:%s%d:%s=", len(k[0]), k[0], len(k[1]), k[1])
		fi, err := ar.Lstat(k[1])
		switch {
		case errors.Is(err, fs.ErrNotExist):
			h.Write([]byte("absent;"))
			continue
		case err != nil:
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		h.Write([]byte(strconv.FormatInt(fi.Size(), 10) + "," + strconv.FormatInt(st.Ctim.Nano(), 10) + "," +
			strconv.FormatInt(st.Mtim.Nano(), 10) + "," + strconv.FormatUint(st.Ino, 10) + "," + strconv.FormatUint(uint64(fi.Mode()), 10) + ";"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
