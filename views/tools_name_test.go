package views

import (
	"slices"
	"testing"
)

func TestNameParts(t *testing.T) {
	for name, want := range map[string][]string{
		"weather__get_forecast": {"weather__", "get_", "forecast"},
		"getCurrentWeather":     {"get", "Current", "Weather"},
		"file_operations.read":  {"file_", "operations.", "read"},
		"a-b/c":                 {"a-", "b/", "c"},
		"echo":                  {"echo"},
		"":                      nil,
		"__x":                   {"__", "x"},
	} {
		if got := nameParts(name); !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q", name, got, want)
		}
	}
}
