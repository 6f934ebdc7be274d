package planner

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// enumInBefore is how fill found an enum value before the step's words were indexed:
// each word, and each two joined, compared with every value.
func enumInBefore(s sentence, enum []string) (j, k int, joined bool) {
	for k := range s.words {
		cands := []string{s.words[k]}
		if k+1 < len(s.words) {
			cands = append([]string{s.words[k] + "_" + s.words[k+1], s.words[k] + "-" + s.words[k+1]}, cands...)
		}
		for _, cand := range cands {
			if j := slices.IndexFunc(enum, func(e string) bool { return strings.EqualFold(e, cand) }); j >= 0 {
				return j, k, strings.ContainsAny(cand, "_-")
			}
		}
	}
	return -1, 0, false
}

// The indexed words find the same value, at the same word, as comparing every word
// with every value did, case folding included (ſ folds to s, K to k).
func TestEnumInAsBefore(t *testing.T) {
	pieces := []string{"a", "b", "A", "s", "S", "ſ", "k", "K", "K", "ß", "é", "É", "_", "-", "\xff", "\ufffd", "x"}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for range 20000 {
		var s sentence
		for range rng.IntN(6) {
			w := word()
			s.words = append(s.words, strings.ToLower(w))
			s.raw = append(s.raw, w)
		}
		var enum []string
		for range rng.IntN(6) {
			e := word()
			if rng.IntN(3) == 0 {
				e += "_" + word()
			}
			enum = append(enum, e)
		}
		j, at := readStepWords(s).enumIn(s, enum)
		wj, wk, wjoined := enumInBefore(s, enum)
		if j != wj || j >= 0 && (at.rank/3 != wk || at.joined != wjoined) {
			t.Fatalf("words %q, enum %q: value %d at word %d (joined %v), before %d at word %d (joined %v)",
				s.words, enum, j, at.rank/3, at.joined, wj, wk, wjoined)
		}
	}
}

// Two strings have the same fold key exactly when strings.EqualFold holds for them.
func TestFoldKeyIsEqualFold(t *testing.T) {
	ss := []string{"", "a", "A", "s", "S", "ſ", "k", "K", "K", "ß", "ẞ", "σ", "Σ", "ς", "é", "É", "\xff", "\ufffd", "_", "-", "aſ", "AS", "ab"}
	for _, a := range ss {
		for _, b := range ss {
			if same := string(foldKey(nil, a)) == string(foldKey(nil, b)); same != strings.EqualFold(a, b) {
				t.Errorf("%q and %q: same key %v, EqualFold %v", a, b, same, strings.EqualFold(a, b))
			}
		}
	}
}

// A step is read tool by tool, and a cancelled request stops the reading.
func TestSentencePlanCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tools := []Tool{{Name: "srv__get_thing", InputSchema: json.RawMessage(`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}`)}}
	if sr := newCatalog(tools).sentencePlan(ctx, "get zz"); !errors.Is(sr.err, context.Canceled) {
		t.Fatalf("a cancelled reading gives %v, want context.Canceled", sr.err)
	}
	if sr := newCatalog(tools).sentencePlan(context.Background(), "get zz"); sr.err != nil || len(sr.plan.Steps) != 1 || string(sr.plan.Steps[0].Arguments) != `{"kind":"zz"}` {
		t.Fatalf("get zz: %+v", sr)
	}
}
