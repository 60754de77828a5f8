package memory

import "strings"

// modelWindows are the context windows of models the gateway knows, by
// name prefix (a dated or suffixed name takes its family's window); the
// longest matching prefix wins. From the providers' model pages; a model
// not listed keeps the session's window, or X-Ctxd-Context-Window says.
var modelWindows = map[string]int{
	"gpt-3.5-turbo": 16_385,
	"gpt-4":         8_192,
	"gpt-4-turbo":   128_000,
	"gpt-4o":        128_000,
	"gpt-4.1":       1_047_576,
	"gpt-5":         400_000,
	"o1":            200_000,
	"o3":            200_000,
	"o4-mini":       200_000,
	"claude-":       200_000,
	"gemini-":       1_048_576,
}

// ModelWindow is the context window of a known model; false when the model
// is not in the table.
func ModelWindow(model string) (int, bool) {
	best, window := "", 0
	for prefix, w := range modelWindows {
		if strings.HasPrefix(model, prefix) && len(prefix) > len(best) {
			best, window = prefix, w
		}
	}
	return window, best != ""
}
