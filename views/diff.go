package views

// maxDiffCells bounds the LCS table; beyond it the differing middle is shown as
// removed-then-added instead of aligned line by line.
const maxDiffCells = 4_000_000

// DiffLines is a line diff of a and b: the lines of a longest common subsequence are
// kept, the rest of a are removed and the rest of b added. Common leading and trailing
// lines are matched first, so the table covers only the middle that differs.
func DiffLines(a, b []string) []ToolDiffLine {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]ToolDiffLine, 0, len(a)+len(b))
	oldNo, newNo := 0, 0
	same := func(s string) {
		oldNo++
		newNo++
		out = append(out, ToolDiffLine{Op: ToolDiffSame, Text: s, Old: oldNo, New: newNo})
	}
	del := func(s string) {
		oldNo++
		out = append(out, ToolDiffLine{Op: ToolDiffRemoved, Text: s, Old: oldNo})
	}
	add := func(s string) {
		newNo++
		out = append(out, ToolDiffLine{Op: ToolDiffAdded, Text: s, New: newNo})
	}
	for _, s := range a[:pre] {
		same(s)
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n*m > maxDiffCells {
		for _, s := range ma {
			del(s)
		}
		for _, s := range mb {
			add(s)
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case ma[i] == mb[j]:
				same(ma[i])
				i++
				j++
			case lcs[i+1][j] >= lcs[i][j+1]:
				del(ma[i])
				i++
			default:
				add(mb[j])
				j++
			}
		}
		for ; i < n; i++ {
			del(ma[i])
		}
		for ; j < m; j++ {
			add(mb[j])
		}
	}
	for _, s := range a[len(a)-suf:] {
		same(s)
	}
	return out
}

// FoldDiff keeps context lines of unchanged text around each change and drops the
// rest of long unchanged stretches; it reports whether it dropped any.
func FoldDiff(lines []ToolDiffLine, context int) ([]ToolDiffLine, bool) {
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.Op == ToolDiffSame {
			continue
		}
		for k := max(0, i-context); k <= min(len(lines)-1, i+context); k++ {
			keep[k] = true
		}
	}
	var out []ToolDiffLine
	folded := false
	for i, l := range lines {
		if keep[i] {
			out = append(out, l)
		} else {
			folded = true
		}
	}
	return out, folded
}
