package assistant

import (
	"strings"
	"testing"
)

// fixture is the catalogue the understanding tests read messages against: six servers
// and twenty-five tools, with the ambiguity a real installation has.
//
//   - Three tools are about the weather, on two servers: weather/get_forecast ("Weather
//     forecast", weather.gov), weather/get_alerts ("Weather alerts") and ev2/get_weather
//     ("Current weather", OpenWeather). Every tool on the weather server is a weather
//     tool, so "the weather tool" means those three whether a reader goes by the server's
//     name or by the tools' own words.
//   - Two tools are called "search": ev2/search (charging stations) and files/search
//     (file contents). No other tool says "search".
//   - "translation" is a server's name and is said by one tool only
//     (translation/translate_text, "Machine translation: ..."); "image generation" is the
//     image-gen server's description and said by one tool only (image-gen/generate_image).
//   - Some tool names are also verbs of the assistant (builtin/add, image-gen/describe_image).
//
// Ids read in tests: a server is "s-"+name, a tool is "t-"+server+"."+name.
func fixture() *Catalogue {
	cat := &Catalogue{
		Servers: []Server{
			{ID: "s-weather", Name: "weather", Description: "US National Weather Service (weather.gov) forecasts and alerts",
				URL: "https://weather.example.com/mcp", Type: "streamable_http", Status: "connected", Enabled: true},
			{ID: "s-ev2", Name: "ev2", Description: "EV trip planner: charging stations, routes and road conditions",
				URL: "https://ev2.example.net/mcp", Type: "streamable_http", Status: "connected", Enabled: true},
			{ID: "s-files", Name: "files", Description: "Read and write files in the shared workspace",
				Type: "stdio", Status: "connected", Enabled: true},
			{ID: "s-translation", Name: "translation", Description: "Machine translation between 40 languages",
				URL: "https://translate.example.org/mcp", Type: "sse", Status: "disconnected", Enabled: false},
			{ID: "s-image-gen", Name: "image-gen", Description: "Image generation and editing",
				URL: "https://images.example.com/mcp", Type: "streamable_http", Status: "error", Enabled: true},
			{ID: "s-builtin", Name: "builtin", Description: "Tools built into Toolwarden",
				Type: "builtin", Status: "connected", Enabled: true, Builtin: true},
		},
		Users: []string{"alice", "bob", "carol"},
	}
	add := func(server string, t Tool) {
		t.ServerID, t.Server = "s-"+server, server
		t.ID = "t-" + server + "." + t.Name
		cat.Tools = append(cat.Tools, t)
	}

	// weather: weather.gov.
	add("weather", Tool{Name: "get_forecast", Title: "Weather forecast",
		Description: "Get the weather forecast for a location for the next few days (weather.gov).",
		State:       "enabled", Risk: "LOW", Category: "weather", Tags: []string{"forecast", "public"},
		Params: []Param{
			{Name: "location", Type: "string", Description: "City name or latitude,longitude"},
			{Name: "days", Type: "integer", Description: "How many days ahead, 1 to 7"},
			{Name: "units", Type: "string", Description: "Temperature and wind units", Enum: []string{"metric", "imperial"}},
		}})
	add("weather", Tool{Name: "get_alerts", Title: "Weather alerts",
		Description: "Active weather alerts (storms, floods, heat) for a US state.",
		State:       "enabled", Risk: "LOW", Category: "weather", Tags: []string{"alerts"},
		Params: []Param{{Name: "state", Type: "string", Description: "Two-letter US state code"}}})

	// ev2: EV trips.
	add("ev2", Tool{Name: "get_weather", Title: "Current weather",
		Description: "Current weather conditions (temperature, wind, rain) at a place, from OpenWeather.",
		State:       "enabled", Risk: "LOW", Category: "weather",
		Params: []Param{
			{Name: "place", Type: "string", Description: "Place name"},
			{Name: "lang", Type: "string", Description: "Language of the conditions text"},
		}})
	add("ev2", Tool{Name: "search", Title: "Search charging stations",
		Description: "Search charging stations near a place by connector type.",
		State:       "enabled", Risk: "LOW", Category: "travel", Tags: []string{"ev"},
		Params: []Param{
			{Name: "query", Type: "string", Description: "Place or station name"},
			{Name: "connector", Type: "string", Description: "Connector type", Enum: []string{"ccs", "chademo", "type2"}},
		}})
	add("ev2", Tool{Name: "plan_route", Title: "Plan a route",
		Description: "Plan a driving route with charging stops between two places.",
		State:       "validated", Risk: "LOW", Category: "travel",
		Params: []Param{
			{Name: "from", Type: "string"}, {Name: "to", Type: "string"},
			{Name: "vehicle", Type: "string", Description: "Vehicle model"},
		}})
	add("ev2", Tool{Name: "get_charger_status", Title: "Charger status",
		Description: "Live availability of one charging station.",
		State:       "validated", Risk: "LOW", Category: "travel",
		Params: []Param{{Name: "station_id", Type: "string"}}})
	add("ev2", Tool{Name: "book_charger", Title: "Book a charger",
		Description: "Reserve a charging slot at a station and pay for it.",
		State:       "disabled", Risk: "HIGH", Category: "travel", Tags: []string{"payments"},
		Params: []Param{
			{Name: "station_id", Type: "string"}, {Name: "start", Type: "string", Description: "Start time"},
			{Name: "minutes", Type: "integer"},
		}})

	// files: a stdio server.
	add("files", Tool{Name: "read_file", Title: "Read file",
		Description: "Read the contents of a file in the workspace.",
		State:       "enabled", Risk: "LOW", Category: "files",
		Params: []Param{{Name: "path", Type: "string"}}})
	add("files", Tool{Name: "write_file", Title: "Write file",
		Description: "Create or overwrite a file in the workspace.",
		State:       "validated", Risk: "HIGH", Category: "files",
		Params: []Param{{Name: "path", Type: "string"}, {Name: "content", Type: "string"}}})
	add("files", Tool{Name: "list_directory", Title: "List directory",
		Description: "List the files and folders in a directory.",
		State:       "enabled", Risk: "LOW", Category: "files",
		Params: []Param{{Name: "path", Type: "string"}}})
	add("files", Tool{Name: "search", Title: "Search files",
		Description: "Search file contents in the workspace for a text pattern.",
		State:       "enabled", Risk: "LOW", Category: "files",
		Params: []Param{{Name: "pattern", Type: "string"}, {Name: "path", Type: "string"}}})
	add("files", Tool{Name: "delete_file", Title: "Delete file",
		Description: "Delete a file from the workspace.",
		State:       "disabled", Risk: "HIGH", Category: "files",
		Params: []Param{{Name: "path", Type: "string"}}})
	add("files", Tool{Name: "move_file", Title: "Move file",
		Description: "Move or rename a file.",
		State:       "validated", Risk: "MEDIUM", Category: "files",
		Params: []Param{{Name: "from", Type: "string"}, {Name: "to", Type: "string"}}})

	// translation: a disabled server.
	add("translation", Tool{Name: "translate_text", Title: "Translate text",
		Description: "Machine translation: translate text into another language.",
		State:       "disabled", Risk: "LOW", Category: "language", Tags: []string{"nlp"},
		Params: []Param{
			{Name: "text", Type: "string"},
			{Name: "target_lang", Type: "string", Description: "Target language code"},
			{Name: "formality", Type: "string", Enum: []string{"formal", "informal"}},
		}})
	add("translation", Tool{Name: "detect_language", Title: "Detect language",
		Description: "Detect which language a text is written in.",
		State:       "disabled", Risk: "LOW", Category: "language", Tags: []string{"nlp", "internal"},
		Params: []Param{{Name: "text", Type: "string"}}})
	add("translation", Tool{Name: "list_languages", Title: "List languages",
		Description: "List the supported language codes.",
		State:       "disabled", Risk: "LOW", Category: "language"})

	// image-gen: connection in error.
	add("image-gen", Tool{Name: "generate_image", Title: "Generate image",
		Description: "Image generation: create an image from a text prompt.",
		State:       "enabled", Risk: "MEDIUM", Category: "media", Tags: []string{"beta", "experimental"},
		Params: []Param{
			{Name: "prompt", Type: "string"},
			{Name: "size", Type: "string", Enum: []string{"256x256", "512x512", "1024x1024"}},
			{Name: "style", Type: "string"},
		}})
	add("image-gen", Tool{Name: "resize_image", Title: "Resize image",
		Description: "Resize an image to a given width and height.",
		State:       "validated", Risk: "LOW", Category: "media", Tags: []string{"beta"},
		Params: []Param{
			{Name: "image", Type: "string"}, {Name: "width", Type: "integer"}, {Name: "height", Type: "integer"},
		}})
	add("image-gen", Tool{Name: "upscale_image", Title: "Upscale image",
		Description: "Upscale an image to a higher resolution.",
		State:       "disabled", Risk: "LOW", Category: "media",
		Params: []Param{{Name: "image", Type: "string"}, {Name: "factor", Type: "integer"}}})
	add("image-gen", Tool{Name: "describe_image", Title: "Describe image",
		Description: "Write a caption saying what is in an image.",
		State:       "enabled", Risk: "LOW", Category: "media",
		Params: []Param{{Name: "image", Type: "string"}}})

	// builtin.
	add("builtin", Tool{Name: "echo", Title: "Echo", Description: "Return the text it is given.",
		State: "enabled", Risk: "LOW", Category: "utility",
		Params: []Param{{Name: "text", Type: "string"}}})
	add("builtin", Tool{Name: "add", Title: "Add numbers", Description: "Add two numbers.",
		State: "enabled", Risk: "LOW", Category: "utility",
		Params: []Param{{Name: "a", Type: "number"}, {Name: "b", Type: "number"}}})
	add("builtin", Tool{Name: "current_time", Title: "Current time",
		Description: "The current date and time in a time zone.",
		State:       "enabled", Risk: "LOW", Category: "utility",
		Params: []Param{{Name: "timezone", Type: "string", Description: "IANA zone, e.g. Europe/Paris"}}})
	add("builtin", Tool{Name: "http_get", Title: "HTTP GET",
		Description: "Fetch a URL over HTTP and return the body.",
		State:       "validated", Risk: "MEDIUM", Category: "network",
		Params: []Param{{Name: "url", Type: "string"}}})
	add("builtin", Tool{Name: "sleep", Title: "Sleep", Description: "Wait for a number of seconds.",
		State: "enabled", Risk: "LOW", Category: "utility",
		Params: []Param{{Name: "seconds", Type: "number"}}})
	return cat
}

// The fixture is what its comment says, so the expectations built on it hold.
func TestFixture(t *testing.T) {
	cat := fixture()
	servers := map[string]Server{}
	for _, s := range cat.Servers {
		if s.ID != "s-"+s.Name {
			t.Errorf("server %q has id %q", s.Name, s.ID)
		}
		servers[s.ID] = s
	}
	if len(cat.Servers) != 6 || len(cat.Tools) != 25 {
		t.Errorf("%d servers and %d tools, want 6 and 25", len(cat.Servers), len(cat.Tools))
	}
	ids := map[string]bool{}
	says := func(word string) (out []string) {
		for _, tl := range cat.Tools {
			text := strings.ToLower(tl.Name + " " + tl.Title + " " + tl.Description)
			if strings.Contains(text, word) {
				out = append(out, tl.ID)
			}
		}
		return out
	}
	for _, tl := range cat.Tools {
		if ids[tl.ID] {
			t.Errorf("tool id %q twice", tl.ID)
		}
		ids[tl.ID] = true
		if s, ok := servers[tl.ServerID]; !ok || s.Name != tl.Server {
			t.Errorf("tool %q: server %q/%q is not in the catalogue", tl.ID, tl.ServerID, tl.Server)
		}
	}
	for _, id := range append(append(append([]string{}, weatherTools...), searchTools...),
		"t-translation.translate_text", "t-image-gen.generate_image") {
		if !ids[id] {
			t.Errorf("tool %q is not in the fixture", id)
		}
	}
	for word, want := range map[string][]string{
		"weather":          weatherTools,
		"search":           searchTools,
		"translat":         {"t-translation.translate_text"},
		"image generation": {"t-image-gen.generate_image"},
		"forecast":         {"t-weather.get_forecast"},
	} {
		if got := says(word); !sameSet(got, want) {
			t.Errorf("tools saying %q: %v, want %v", word, got, want)
		}
	}
}
