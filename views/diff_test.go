package views

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// render shows a diff compactly: one line per entry, "+x", "-x" or " x".
func renderDiff(ls []ToolDiffLine) string {
	var b strings.Builder
	for _, l := range ls {
		switch l.Op {
		case ToolDiffAdded:
			b.WriteString("+")
		case ToolDiffRemoved:
			b.WriteString("-")
		default:
			b.WriteString(" ")
		}
		b.WriteString(l.Text)
		b.WriteString("\n")
	}
	return b.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestDiffLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b string
		want string
	}{
		{"both empty", "", "", ""},
		{"equal", "a\nb", "a\nb", " a\n b\n"},
		{"all added", "", "a\nb", "+a\n+b\n"},
		{"all removed", "a\nb", "", "-a\n-b\n"},
		{"one changed in the middle", "a\nb\nc", "a\nx\nc", " a\n-b\n+x\n c\n"},
		{"insert at the start", "b\nc", "a\nb\nc", "+a\n b\n c\n"},
		{"append at the end", "a\nb", "a\nb\nc", " a\n b\n+c\n"},
		{"moved line", "a\nb\nc\nd", "b\nc\na\nd", "-a\n b\n c\n+a\n d\n"},
		{"keeps the longest common run", "x\na\nb\nc\ny", "a\nb\nz\nc", "-x\n a\n b\n+z\n c\n-y\n"},
		{"repeated lines", "}\n}\n}", "}\n}", " }\n }\n-}\n"},
	}
	for _, tc := range cases {
		got := DiffLines(lines(tc.a), lines(tc.b))
		if s := renderDiff(got); s != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, s, tc.want)
		}
		// Every line of a and of b appears once, in order, with its line number.
		var olds, news []string
		oldNo, newNo := 0, 0
		for _, l := range got {
			if l.Op != ToolDiffAdded {
				oldNo++
				olds = append(olds, l.Text)
				if l.Old != oldNo {
					t.Errorf("%s: line %q has old number %d, want %d", tc.name, l.Text, l.Old, oldNo)
				}
			}
			if l.Op != ToolDiffRemoved {
				newNo++
				news = append(news, l.Text)
				if l.New != newNo {
					t.Errorf("%s: line %q has new number %d, want %d", tc.name, l.Text, l.New, newNo)
				}
			}
		}
		if !slices.Equal(olds, lines(tc.a)) || !slices.Equal(news, lines(tc.b)) {
			t.Errorf("%s: the diff does not rebuild both sides: %q / %q", tc.name, olds, news)
		}
	}
}

func TestDiffLinesMinimal(t *testing.T) {
	t.Parallel()
	// Changing every third line of 300 changes exactly those 100 lines.
	var a, b []string
	for i := range 300 {
		a = append(a, fmt.Sprintf("line %d", i))
		if i%3 == 0 {
			b = append(b, fmt.Sprintf("changed %d", i))
		} else {
			b = append(b, fmt.Sprintf("line %d", i))
		}
	}
	added, removed := 0, 0
	for _, l := range DiffLines(a, b) {
		switch l.Op {
		case ToolDiffAdded:
			added++
		case ToolDiffRemoved:
			removed++
		}
	}
	if added != 100 || removed != 100 {
		t.Errorf("got +%d -%d, want +100 -100", added, removed)
	}
}

func TestDiffLinesTooBig(t *testing.T) {
	t.Parallel()
	// Beyond the table's bound the differing middle is shown whole, still correct.
	n := 2100
	a, b := make([]string, n), make([]string, n)
	for i := range n {
		a[i], b[i] = fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
	}
	a = append([]string{"same"}, a...)
	b = append([]string{"same"}, b...)
	got := DiffLines(a, b)
	if len(got) != 1+2*n || got[0].Op != ToolDiffSame || got[1].Op != ToolDiffRemoved || got[len(got)-1].Op != ToolDiffAdded {
		t.Fatalf("got %d lines, want %d: the common line, then removed, then added", len(got), 1+2*n)
	}
}

func TestFoldDiff(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := range 20 {
		a = append(a, fmt.Sprint(i))
		b = append(b, fmt.Sprint(i))
	}
	b[10] = "ten"
	got, folded := FoldDiff(DiffLines(a, b), 2)
	if !folded {
		t.Error("a long unchanged stretch was not folded")
	}
	if s := renderDiff(got); s != " 8\n 9\n-10\n+ten\n 11\n 12\n" {
		t.Errorf("got\n%s", s)
	}
	same, folded := FoldDiff(DiffLines(a, a), 2)
	if len(same) != 0 || !folded {
		t.Errorf("an unchanged text: got %d lines (folded %v), want none", len(same), folded)
	}
}
