package summarize

import (
	"fmt"
	"strings"
)

// systemPrompt is shared by every call. It lists what must survive verbatim
// because paraphrase is where summaries lose what agents need: "the config
// file" is useless where "/etc/ctxd/ctxd.yaml" was said.
const systemPrompt = `You condense conversations between a user, an AI assistant and its tools into notes the assistant will rely on later, when the original messages are gone.

Rules:
- Preserve verbatim, exactly as written: identifiers (function, type, variable and field names, ticket ids like PROJ-123, commit hashes, UUIDs), file paths, URLs, commands, error messages, numbers with their units, versions, dates and names of people.
- Keep every decision (and its reason), every TODO and next step, every open question, and every constraint (must, must not, never, always, only).
- Say who said what: start each line with the speaker as the transcript names them ("user:", "assistant:", a person's or a tool's name).
- Drop greetings, thanks, filler and repetition. Keep the order of events. Prefer short lines, one fact per line.
- Do not add anything the text does not say.
- Output only the summary: no preamble, no closing remark, no headings.`

// prompts builds one call's messages. stage 0 reads the transcript, later
// stages read part summaries; part > 0 is part part of parts, part 0 the
// whole input of the stage (a merge when stage > 0).
func (l *LLM) prompts(j job, stage, part, parts, target int, text string) (sys, user string) {
	var b strings.Builder
	within := fmt.Sprintf("in at most %d tokens (about %d words)", target, max(1, target*3/4))
	what, tag := "a transcript", "transcript"
	if stage > 1 || (stage == 1 && part == 0) {
		what, tag = "summaries of consecutive parts of a transcript", "summaries"
	}
	switch {
	case part > 0:
		fmt.Fprintf(&b, "This is part %d of %d of %s of %s. Summarize this part alone %s; the summaries of the parts will be merged afterwards.", part, parts, what, j.about, within)
	case stage == 0:
		fmt.Fprintf(&b, "Summarize this transcript of %s %s.", j.about, within)
	default:
		fmt.Fprintf(&b, "These are %s of %s, in order. Merge them into one summary %s, keeping the order of events and dropping repetition.", what, j.about, within)
	}
	if j.prompt != "" {
		fmt.Fprintf(&b, "\nThe assistant is now working on: %q. Put first what matters to that, but keep every decision, TODO, open question and constraint.", j.prompt)
	}
	fmt.Fprintf(&b, "\n\n<%s>\n%s\n</%s>", tag, text, tag)
	return systemPrompt, b.String()
}
