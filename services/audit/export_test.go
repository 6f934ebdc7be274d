package audit

import "context"

// Each is each without a batch callback, for the tests of what an export reads.
func (l *Log) Each(ctx context.Context, f Filter, fn func(Record) error) error {
	return l.each(ctx, f, fn, nil)
}
