package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/spf13/cobra"
)

// logStreams are the event streams `ctxd logs` reads, with the fields its
// text form shows first (JSONL has every field).
var logStreams = map[string][]string{
	"compaction":   {"trigger", "tokens_before", "tokens_after", "target", "dropped", "summarized", "summary_method", "took_ms"},
	"drops":        {"chunk", "reason", "score", "threshold", "tokens", "summary_id"},
	"recoveries":   {"chunk", "score", "tokens", "prompt"},
	"health":       {"state", "tokens", "limit", "pct_used", "next_compaction_in_tokens"},
	"purges":       {"chunk", "reason", "tokens", "recoverable_until"},
	"edits":        {"op", "message", "changed", "tokens_before", "tokens_after", "previous_version"},
	"prompt-cache": {"input_tokens", "cache_read_tokens", "cache_write_tokens"},
}

func newLogsCmd() *cobra.Command {
	var session string
	var n int
	cmd := &cobra.Command{
		Use:   "logs compaction|drops|recoveries|health|purges|edits|prompt-cache",
		Short: "Show the last events of a server event stream",
		Long: "Show the last events of one of the server's event streams, oldest first: compaction, drops, " +
			"recoveries, health (context health after each write), purges, edits (messages edited or deleted) or prompt-cache (the upstream's prompt usage on each gateway answer). One line per event; --json " +
			"prints them as JSONL.",
		Example:   "  ctxd logs compaction --session demo -n 5\n  ctxd logs drops --json | jq .score",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"compaction", "drops", "recoveries", "health", "purges", "edits", "prompt-cache"},
	}
	cmd.Flags().StringVar(&session, "session", "", "only this session's events")
	cmd.Flags().IntVarP(&n, "n", "n", 20, "the last N events (1 to 1000)")
	return clientVerb(cmd, func(v *verb, args []string) error {
		stream := args[0]
		if n < 1 {
			return usageErrorf("-n %d: want 1 to 1000", n)
		}
		events, err := v.api.Events(v.ctx, stream, client.EventQuery{SessionID: session, N: n})
		if err != nil {
			return err
		}
		if v.json {
			for _, e := range events {
				line, err := json.Marshal(e)
				if err != nil {
					return fmt.Errorf("encode %s event: %w", stream, err)
				}
				if _, err := fmt.Fprintf(v.out, "%s\n", line); err != nil {
					return err
				}
			}
			return nil
		}
		if len(events) == 0 {
			fmt.Fprintf(v.out, "no %s events\n", stream)
			return nil
		}
		t := newTable(v.out)
		for _, e := range events {
			t.row(eventTime(e), e["session"], eventFields(e, logStreams[stream]))
		}
		return t.flush()
	})
}

// number is an event's number field; 0 when it has none.
func number(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := n.Float64()
	return f
}

func eventTime(e map[string]any) string {
	s, _ := e["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return dash(s)
	}
	return when(t)
}

// eventFields renders an event as key=value: the stream's chosen keys
// first, then any other scalar fields the server added, sorted.
func eventFields(e map[string]any, first []string) string {
	skip := map[string]bool{"time": true, "tenant": true, "session": true, "config": true}
	var parts []string
	add := func(k string) {
		v, ok := e[k]
		if !ok || skip[k] {
			return
		}
		skip[k] = true
		if s := fieldText(v); s != "" {
			parts = append(parts, k+"="+s)
		}
	}
	for _, k := range first {
		add(k)
	}
	rest := make([]string, 0, len(e))
	for k := range e {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		add(k)
	}
	return strings.Join(parts, " ")
}

// fieldText is a value as one word: strings quoted when they have spaces,
// lists and objects as compact JSON, nulls and empty strings left out.
func fieldText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		if x == "" {
			return ""
		}
		x = snippet(x, 60)
		if strings.ContainsAny(x, " \"=") {
			return fmt.Sprintf("%q", x)
		}
		return x
	case json.Number, bool:
		return fmt.Sprint(x)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return snippet(string(js), 80)
}

func newDropsCmd() *cobra.Command {
	var session string
	var n int
	cmd := &cobra.Command{
		Use:     "drops --session S",
		Short:   "List a session's drop events: what went to cold storage, why, with what score",
		Example: "  ctxd drops --session demo -n 10",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().StringVar(&session, "session", "", "the session (required)")
	cmd.Flags().IntVarP(&n, "n", "n", 50, "the last N drops (1 to 1000)")
	return clientVerb(cmd, func(v *verb, _ []string) error {
		if session == "" {
			return usageErrorf("drops needs --session S")
		}
		if n < 1 {
			return usageErrorf("-n %d: want 1 to 1000", n)
		}
		drops, err := v.api.Events(v.ctx, "drops", client.EventQuery{SessionID: session, N: n})
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(api.EventList{Events: drops})
		}
		if len(drops) == 0 {
			fmt.Fprintf(v.out, "no drops in session %s\n", session)
			return nil
		}
		t := newTable(v.out, "ID", "REASON", "SCORE", "THRESHOLD", "TOKENS", "WHEN")
		for _, d := range drops {
			chunk, _ := d["chunk"].(string)
			reason, _ := d["reason"].(string)
			t.row(chunk, reason, score(number(d["score"])), score(number(d["threshold"])), int(number(d["tokens"])), eventTime(d))
		}
		return t.flush()
	})
}
