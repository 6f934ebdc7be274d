package schema

import (
	"sort"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// confusables maps letters of other scripts that look like a Latin letter to
// that letter, in the spirit of the skeletons of Unicode's UTS #39: a curated
// table of the common look-alikes rather than all of confusables.txt (about
// 1 MB, mostly symbols and letters no font draws like Latin ones). Letters
// with accents, fullwidth and mathematical letters need no entry: foldText
// decomposes them (NFKD) and drops the marks first. µ/μ, β, σ and the like
// are left out because they are common in honest technical text.
var confusables = map[rune]byte{
	// Cyrillic.
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x',
	'і': 'i', 'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'һ': 'h',
	'ӏ': 'i', 'ѡ': 'w', 'ѵ': 'v', 'ү': 'y', 'г': 'r', 'ҽ': 'e',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O',
	'Р': 'P', 'С': 'C', 'Т': 'T', 'Х': 'X', 'У': 'Y', 'Ү': 'Y', 'І': 'I',
	'Ј': 'J', 'Ѕ': 'S', 'Ԛ': 'Q', 'Ԝ': 'W', 'Һ': 'h', 'Ѵ': 'V', 'Ѡ': 'W',
	'Ԍ': 'G', 'Ӏ': 'l', 'Ь': 'b',
	// Greek.
	'α': 'a', 'γ': 'y', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v',
	'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'ω': 'w', 'ϲ': 'c',
	'ϳ': 'j', 'ϱ': 'p',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K',
	'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	'Ϲ': 'C', 'Ϳ': 'J', 'Ϝ': 'F', 'Ϻ': 'M',
	// Armenian.
	'օ': 'o', 'ս': 'u', 'ց': 'g', 'հ': 'h', 'ո': 'n', 'ռ': 'n', 'ա': 'w',
	'զ': 'q', 'գ': 'q', 'յ': 'j', 'ք': 'f',
	'Օ': 'O', 'Ս': 'U', 'Տ': 'S', 'Լ': 'L',
	// Cherokee (foldText maps the small letters to these capitals first).
	'Ꭺ': 'A', 'Ᏼ': 'B', 'Ꮯ': 'C', 'Ꭰ': 'D', 'Ꭼ': 'E', 'Ꮐ': 'G', 'Ᏻ': 'G',
	'Ꮋ': 'H', 'Ꮒ': 'h', 'Ꭵ': 'i', 'Ꭻ': 'J', 'Ꮶ': 'K', 'Ꮮ': 'L', 'Ꮇ': 'M',
	'Ꮲ': 'P', 'Ꭱ': 'R', 'Ꮢ': 'R', 'Ꮪ': 'S', 'Ꮥ': 'S', 'Ꭲ': 'T', 'Ꮩ': 'V',
	'Ꮃ': 'W', 'Ꮤ': 'W', 'Ꭹ': 'Y', 'Ꮍ': 'Y', 'Ꮓ': 'Z', 'Ꮟ': 'b', 'Ꮷ': 'd',
	// Latin letters outside ASCII that NFKD leaves alone.
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɡ': 'g', 'ɩ': 'i', 'ǀ': 'l', 'ᴄ': 'c',
	'ᴏ': 'o', 'ᴑ': 'o', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ᴢ': 'z',
}

// foldText returns s as the injection and secret rules should read it:
// compatibility-decomposed (NFKD: fullwidth and mathematical letters become
// plain ones), without combining marks, and with look-alike letters mapped to
// Latin. The folds map the result back to s (unfold), so a match can be quoted
// as written; they are nil when s is ASCII and comes back unchanged.
//
// Its cost stays near the text's size whatever the text, which an upstream
// server writes: a decomposition of more than maxFoldRunes runes (U+FDFA is 18)
// is left as the rune itself (no Latin look-alike needs one), an invalid byte
// becomes one '?', and the map back holds one entry per non-ASCII rune and per
// ASCII run after one, not one per byte.
func foldText(s string) (string, []fold) {
	if isASCII(s) {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	var folds []fold
	put := func(c byte, i int) {
		if c == ' ' && len(out) > 0 && out[len(out)-1] == ' ' {
			return // "¨" decomposes to a space and a mark
		}
		out = append(out, c)
	}
	for i, r := range s {
		if r < utf8.RuneSelf {
			// Copied one to one: a run goes on unless a byte was dropped before it.
			if n := len(folds); n == 0 || !folds[n-1].run || int(folds[n-1].in)+len(out)-int(folds[n-1].out) != i {
				folds = append(folds, fold{out: int32(len(out)), in: int32(i), run: true})
			}
			put(byte(r), i)
			continue
		}
		folds = append(folds, fold{out: int32(len(out)), in: int32(i)})
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(s[i:]); w == 1 {
				put('?', i)
				continue
			}
		}
		d := decomposition(r)
		if d == nil || utf8.RuneCount(d) > maxFoldRunes {
			d = []byte(string(r))
		}
		for _, x := range string(d) {
			if unicode.Is(unicode.Cherokee, x) {
				x = unicode.ToUpper(x)
			}
			if c, ok := confusables[x]; ok {
				put(c, i)
			} else if !unicode.In(x, unicode.Mn, unicode.Me) {
				var enc [utf8.UTFMax]byte
				for _, c := range enc[:utf8.EncodeRune(enc[:], x)] {
					put(c, i)
				}
			}
		}
	}
	return string(out), folds
}

// maxFoldRunes bounds the decomposition foldText uses: a letter with its marks, or a
// ligature of two or three letters.
const maxFoldRunes = 3

// fold maps the folded text from byte out on back to s: to the rune at in, or, in a
// run of ASCII copied one to one, to in plus the distance from out.
type fold struct {
	out, in int32
	run     bool
}

// origin is the byte of s that produced byte o of foldText's result.
func origin(folds []fold, o int) int {
	i := sort.Search(len(folds), func(i int) bool { return int(folds[i].out) > o }) - 1
	if i < 0 {
		return o
	}
	f := folds[i]
	if f.run {
		return int(f.in) + o - int(f.out)
	}
	return int(f.in)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// decomposition returns the NFKD decomposition of r, or nil when it has none.
func decomposition(r rune) []byte {
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	return norm.NFKD.Properties(buf[:n]).Decomposition()
}

// base returns the first rune of r's decomposition: the letter without its marks.
func base(r rune) rune {
	if d := decomposition(r); d != nil {
		r, _ = utf8.DecodeRune(d)
	}
	return r
}

// unfold maps the byte range [from, to) of foldText's result back to s.
func unfold(s string, folds []fold, from, to int) (int, int) {
	if folds == nil {
		return from, to
	}
	start := origin(folds, from)
	if to <= from {
		return start, start
	}
	last := origin(folds, to-1)
	_, w := utf8.DecodeRuneInString(s[last:])
	return start, last + w
}

// mixedWord is a word that mixes alphabets, and its first letter from the
// alphabet it has fewer letters of.
type mixedWord struct {
	word   string
	odd    rune
	script string
}

// mixedWords returns the words of s that mix Latin letters with Cyrillic,
// Armenian or Cherokee ones, or with Greek look-alikes of Latin letters: Greek
// symbols next to Latin letters are common in honest technical text (µs, kΩ,
// Δt, σx), look-alikes in a longer Latin word are not. Letters are judged
// after NFKD, so a fullwidth letter counts as Latin. Text wholly in one
// alphabet, whichever it is, has none.
func mixedWords(s string) []mixedWord {
	if isASCII(s) {
		return nil
	}
	var out []mixedWord
	start := -1
	for i, r := range s {
		inWord := unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r)
		if inWord && start < 0 {
			start = i
		} else if !inWord && start >= 0 {
			if m, ok := mixed(s[start:i]); ok {
				out = append(out, m)
			}
			start = -1
		}
	}
	if start >= 0 {
		if m, ok := mixed(s[start:]); ok {
			out = append(out, m)
		}
	}
	return out
}

func mixed(w string) (mixedWord, bool) {
	var latin, other []rune
	var otherScript string
	greekLike, foreign := false, false
	for _, r := range w {
		if r < utf8.RuneSelf {
			if unicode.IsLetter(r) {
				latin = append(latin, r)
			}
			continue
		}
		d := base(r)
		script := ""
		switch {
		case unicode.Is(unicode.Latin, d):
			latin = append(latin, r)
		case unicode.Is(unicode.Greek, d):
			script = "Greek"
			if _, ok := confusables[d]; ok {
				greekLike = true
			}
		case unicode.Is(unicode.Cyrillic, d):
			script, foreign = "Cyrillic", true
		case unicode.Is(unicode.Armenian, d):
			script, foreign = "Armenian", true
		case unicode.Is(unicode.Cherokee, d):
			script, foreign = "Cherokee", true
		}
		if script != "" {
			if otherScript == "" {
				otherScript = script
			}
			other = append(other, r)
		}
	}
	if len(latin) == 0 || len(other) == 0 || !(foreign || greekLike && len(latin) >= 2) {
		return mixedWord{}, false
	}
	m := mixedWord{word: w, odd: other[0], script: otherScript}
	if len(latin) < len(other) {
		m.odd, m.script = latin[0], "Latin"
	}
	return m, true
}
