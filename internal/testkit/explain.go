package testkit

import (
	"encoding/json"
	"testing"
)

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Relation      string     `json:"Relation Name"`
	Rows          float64    `json:"Actual Rows"`
	Loops         float64    `json:"Actual Loops"`
	Filtered      float64    `json:"Rows Removed by Filter"`
	IndexFiltered float64    `json:"Rows Removed by Index Recheck"`
	Plans         []planNode `json:"Plans"`
}

// RowsRead adds up, per table, the rows a plan read (those it returned and those its
// filters removed, in every loop), from the output of EXPLAIN (ANALYZE, FORMAT JSON):
// what a test bounds to show a query does not scan.
func RowsRead(t testing.TB, explained []byte) map[string]int64 {
	t.Helper()
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(explained, &plans); err != nil {
		t.Fatalf("testkit: explain output: %v", err)
	}
	read := map[string]int64{}
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if n.Relation != "" {
			read[n.Relation] += int64((n.Rows + n.Filtered + n.IndexFiltered) * n.Loops)
		}
		for i := range n.Plans {
			walk(&n.Plans[i])
		}
	}
	for i := range plans {
		walk(&plans[i].Plan)
	}
	return read
}
