package views

import (
	"context"
	"slices"
	"strings"
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

// A card on /tools offers a line break after each part of its tool's name, so a long
// snake_case or camelCase name wraps between words in a narrow column, not mid-word.
func TestToolCardNameBreaks(t *testing.T) {
	var b strings.Builder
	if err := toolCard(ToolCard{ID: "t1", Name: "get_current_weatherForecast", QualifiedName: "wx__get_current_weatherForecast"}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if want := "get_<wbr>current_<wbr>weather<wbr>Forecast"; !strings.Contains(b.String(), want) {
		t.Fatalf("the card's name has no break opportunities %q:\n%s", want, b.String())
	}
}
