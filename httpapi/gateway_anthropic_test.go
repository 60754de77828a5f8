package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// A mid-conversation system turn stands only right after a user turn: one
// whose user turn the window dropped becomes a user turn merged with its
// neighbours, and the breakpoint places follow the blocks.
func TestPlaceSystemTurns(t *testing.T) {
	turn := func(role string, texts ...string) anthropicTurn {
		tt := anthropicTurn{Role: role}
		for _, s := range texts {
			b, _ := json.Marshal(anthropicBlock{Type: "text", Text: s})
			tt.Content = append(tt.Content, b)
		}
		return tt
	}
	show := func(turns []anthropicTurn) string {
		var parts []string
		for _, t := range turns {
			var texts []string
			for _, b := range t.Content {
				var ab anthropicBlock
				_ = json.Unmarshal(b, &ab)
				texts = append(texts, ab.Text)
			}
			parts = append(parts, t.Role+":"+strings.Join(texts, ","))
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		name  string
		turns []anthropicTurn
		at    [][2]int
		want  string
		wantA [][2]int
	}{
		{"after a user turn: kept", []anthropicTurn{turn("user", "u1"), turn("system", "s1"), turn("assistant", "a1")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}}, "user:u1 system:s1 assistant:a1", [][2]int{{0, 0}, {1, 0}, {2, 0}}},
		{"first: a user turn", []anthropicTurn{turn("system", "s1"), turn("assistant", "a1")},
			[][2]int{{0, 0}, {1, 0}}, "user:s1 assistant:a1", [][2]int{{0, 0}, {1, 0}}},
		{"after an assistant turn: merged into the next user turn", []anthropicTurn{turn("user", "u1"), turn("assistant", "a1"), turn("system", "s1"), turn("user", "u2", "u3")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 1}}, "user:u1 assistant:a1 user:s1,u2,u3", [][2]int{{0, 0}, {1, 0}, {2, 0}, {2, 2}}},
		{"a later turn moves up", []anthropicTurn{turn("user", "u1"), turn("assistant", "a1"), turn("system", "s1"), turn("assistant", "a2"), turn("user", "u2")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {-1, -1}}, "user:u1 assistant:a1 user:s1 assistant:a2 user:u2", [][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {-1, -1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := placeSystemTurns(c.turns, c.at)
			if show(got) != c.want {
				t.Errorf("turns %s, want %s", show(got), c.want)
			}
			for i := range c.at {
				if c.at[i] != c.wantA[i] {
					t.Errorf("at %v, want %v", c.at, c.wantA)
					break
				}
			}
		})
	}
}
