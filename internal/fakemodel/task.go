package fakemodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Task is a scripted coding task, one tool call per step, then an answer.
// Odd steps read a file of 1k to 8k tokens (with the client's file-reading
// tool where it has one, else its shell); even steps hash a text of about
// 3k tokens written into the shell command itself, so that the assistant's
// own turns (which ctxd never prunes, unlike old tool output) fill the
// window too and ctxd has to compact.
type Task struct {
	Dir   string
	Steps int
}

// NewTask writes the task's files into dir.
func NewTask(dir string, steps int) (*Task, error) {
	t := &Task{Dir: dir, Steps: steps}
	for k := 1; k <= steps; k += 2 {
		if err := os.WriteFile(t.path(k), []byte(t.content(k)), 0o644); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Task) path(k int) string { return filepath.Join(t.Dir, fmt.Sprintf("module%03d.txt", k)) }

// Marker is what the result of step k must carry back to the model: the
// first line of its file, or the hash of its text.
func (t *Task) Marker(k int) string {
	if k%2 == 0 {
		sum := sha256.Sum256([]byte(t.text(k)))
		return hex.EncodeToString(sum[:])
	}
	return fmt.Sprintf("MARKER-%03d-%08x", k, uint32(k)*2654435761)
}

// text is the text step k hashes: about 3k tokens of words.
func (t *Task) text(k int) string {
	var b strings.Builder
	for i := 0; i < 2400; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(k*7+i*i)%len(words)])
	}
	return b.String()
}

// Final is the model's answer after the last step.
func (t *Task) Final() string {
	return fmt.Sprintf("TASK COMPLETE: read all %d modules.", t.Steps)
}

// words makes file text varied enough for search and summaries.
var words = strings.Fields(`parser lexer token buffer index cache session window budget compact summary cold recover
	score relevance handler router request response stream event flush note pinned tenant retention vector embed`)

// content is step k's file: its marker, then lines of about 12 tokens up
// to between 1k and 8k tokens (the size cycles), under the 30,000
// characters at which agent CLIs cut a tool's output.
func (t *Task) content(k int) string {
	lines := 80 + (k*37)%7*80 // 80..560 lines: about 1k..7.5k tokens
	var b strings.Builder
	b.WriteString(t.Marker(k) + "\n")
	for i := 0; i < lines && b.Len() < 28000; i++ {
		fmt.Fprintf(&b, "%03d.%03d %s %s %s(%d) -> %s\n", k, i, words[(k+i)%len(words)], words[(k*3+i*7)%len(words)],
			words[(i*5+1)%len(words)], i*k%997, words[(k*11+i)%len(words)])
	}
	return b.String()
}

// tool is one tool a client offers: its name and its input's schema.
type tool struct {
	name string
	// custom is a freeform tool (Responses' "custom"): its input is text,
	// not JSON arguments.
	custom bool
	schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
}

// The names the clients give their shell and file-reading tools.
var (
	shellNames = []string{"Bash", "bash", "shell", "exec_command", "shell_command", "local_shell", "exec"}
	readNames  = []string{"Read", "read", "read_file"}
)

func hasTool(tools []tool, name string) bool {
	return slices.ContainsFunc(tools, func(t tool) bool { return t.name == name })
}

// pick returns the first of names the client offers.
func pick(tools []tool, names []string) *tool {
	for _, n := range names {
		for i := range tools {
			if tools[i].name == n {
				return &tools[i]
			}
		}
	}
	return nil
}

// Action is step k's tool call: the tool and its arguments, filled in by
// the tool's own schema.
func (t *Task) Action(k int, tools []tool) (tool, string) {
	command := "cat " + t.path(k)
	if k%2 == 0 {
		command = "printf %s '" + t.text(k) + "' | sha256sum"
	} else if r := pick(tools, readNames); r != nil {
		return *r, r.args(map[string]any{"path": t.path(k)})
	}
	sh := pick(tools, shellNames)
	if sh.custom {
		// Codex's code mode: JavaScript that calls its nested shell tool.
		return *sh, fmt.Sprintf("const r = await tools.exec_command({cmd: %q});\ntext(r);", command)
	}
	return *sh, sh.args(map[string]any{"command": command})
}

// args fills the tool's properties: a path or command under whatever name
// the schema gives it, and any other required property with a plain value.
func (t tool) args(want map[string]any) string {
	out := map[string]any{}
	for name, raw := range t.schema.Properties {
		var p struct {
			Type any `json:"type"`
		}
		_ = json.Unmarshal(raw, &p)
		typ := fmt.Sprint(p.Type)
		switch {
		case want["path"] != nil && (name == "file_path" || name == "filePath" || name == "path"):
			out[name] = want["path"]
		case want["command"] != nil && (name == "command" || name == "cmd"):
			if typ == "array" {
				out[name] = []string{"bash", "-lc", want["command"].(string)}
			} else {
				out[name] = want["command"]
			}
		case slices.Contains(t.schema.Required, name):
			switch typ {
			case "string":
				out[name] = "Read a module file"
			case "number", "integer":
				out[name] = 60000
			case "boolean":
				out[name] = false
			}
		}
	}
	data, _ := json.Marshal(out)
	return string(data)
}
