package summarize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ctxd/ctxd/memory"
	openai "github.com/sashabaranov/go-openai"
)

// LLMConfig configures the LLM summarizer.
type LLMConfig struct {
	// BaseURL is the root of an OpenAI-compatible API, including its version
	// ("https://api.openai.com/v1", "http://localhost:11434/v1"); "" is OpenAI.
	BaseURL string
	Model   string
	APIKey  string // "" sends no Authorization header (local servers)
	// Timeout bounds each HTTP request; default 60s.
	Timeout time.Duration
	// MaxRetries is how many times a failed call is retried: 0 means the
	// default of 2, a negative value none.
	MaxRetries int
	// Backoff is the wait before the first retry, doubled for each further
	// one (at most 30s); default 500ms.
	Backoff time.Duration
	// MaxInputTokens bounds one call's prompt, instructions included; longer
	// transcripts are summarized in parts and merged. Default 6000.
	MaxInputTokens int
	// Temperature defaults to 0.1: go-openai drops a 0 from the request and
	// the server then uses its own default (1 at OpenAI).
	Temperature float32
}

const (
	defaultTimeout        = 60 * time.Second
	defaultRetries        = 2
	defaultBackoff        = 500 * time.Millisecond
	maxBackoff            = 30 * time.Second
	defaultMaxInputTokens = 6000
	minMaxInputTokens     = 512
	defaultTemperature    = 0.1
	// maxStages bounds summaries of summaries: each stage shrinks its input
	// to at most half a call's room, so two stages cover millions of tokens.
	maxStages = 4
	// minPartTarget keeps a small part's summary long enough to say anything.
	minPartTarget = 48
	// parallelParts bounds the part summaries in flight at once.
	parallelParts = 4
	// maxPromptTokens bounds the agent's prompt quoted in the instructions.
	maxPromptTokens = 200
	// maxNoteBytes bounds an upstream error quoted in Summary.Note.
	maxNoteBytes = 300
)

// LLM summarizes with a chat model behind an OpenAI-compatible endpoint. When
// the endpoint fails it falls back to another summarizer (the extractive one)
// and, failing that, to an annotation: it never fails for the network.
type LLM struct {
	cfg      LLMConfig
	retries  int
	client   *openai.Client
	tok      memory.Tokenizer
	fallback memory.Summarizer
	// sampling is whether the model takes temperature and max_tokens:
	// reasoning models (o1, o3, gpt-5...) refuse both, and go-openai checks
	// that before sending.
	sampling bool
}

var _ memory.Summarizer = (*LLM)(nil)

// NewLLM returns an LLM summarizer. fallback may be nil (failures then give
// an annotation).
func NewLLM(cfg LLMConfig, tok memory.Tokenizer, fallback memory.Summarizer) (*LLM, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("llm summarizer: model is required")
	}
	if tok == nil {
		return nil, errors.New("llm summarizer: tokenizer is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = defaultRetries
	case retries < 0:
		retries = 0
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = defaultBackoff
	}
	if cfg.MaxInputTokens == 0 {
		cfg.MaxInputTokens = defaultMaxInputTokens
	}
	if cfg.MaxInputTokens < minMaxInputTokens {
		return nil, fmt.Errorf("llm summarizer: max input tokens %d is below %d", cfg.MaxInputTokens, minMaxInputTokens)
	}
	if cfg.Temperature == 0 {
		cfg.Temperature = defaultTemperature
	}
	if cfg.Temperature < 0 || cfg.Temperature > 2 {
		return nil, fmt.Errorf("llm summarizer: temperature %g is outside [0, 2]", cfg.Temperature)
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	}
	oc.HTTPClient = &http.Client{Timeout: cfg.Timeout}
	// max_tokens, not max_completion_tokens: more OpenAI-compatible local
	// servers (Ollama, vLLM, llama.cpp) accept it.
	//lint:ignore SA1019 see above
	probe := openai.ChatCompletionRequest{Model: cfg.Model, Temperature: cfg.Temperature, MaxTokens: 1}
	return &LLM{
		cfg:      cfg,
		retries:  retries,
		client:   openai.NewClientWithConfig(oc),
		tok:      tok,
		fallback: fallback,
		sampling: openai.NewReasoningValidator().Validate(probe) == nil,
	}, nil
}

// Summarize implements memory.Summarizer. It returns an error only for an
// invalid request or a cancelled ctx; upstream failures are reported in the
// Summary's Method and Note.
func (l *LLM) Summarize(ctx context.Context, req memory.SummaryRequest) (memory.Summary, error) {
	if err := validateRequest(l.tok, req); err != nil {
		return memory.Summary{}, err
	}
	text, err := l.summarize(ctx, req)
	if err == nil {
		return memory.Summary{Text: text, Method: memory.SummaryLLM}, nil
	}
	if ctx.Err() != nil {
		return memory.Summary{}, fmt.Errorf("llm summarizer: %w", ctx.Err())
	}
	return l.fallBack(ctx, req, err)
}

// fallBack answers when the model could not.
func (l *LLM) fallBack(ctx context.Context, req memory.SummaryRequest, cause error) (memory.Summary, error) {
	why := "llm summarizer failed: " + clip(cause.Error(), maxNoteBytes)
	if l.fallback != nil {
		s, err := l.fallback.Summarize(ctx, req)
		if err == nil {
			if s.Method == "" {
				s.Method = memory.SummaryExtractive
			}
			note := why + "; used " + s.Method
			if s.Note != "" {
				note += " (" + s.Note + ")"
			}
			return memory.Summary{Text: s.Text, Method: s.Method, Note: note}, nil
		}
		if ctx.Err() != nil {
			return memory.Summary{}, fmt.Errorf("llm summarizer: fallback: %w", ctx.Err())
		}
		why += "; fallback failed: " + clip(err.Error(), maxNoteBytes)
	} else {
		why += "; no fallback summarizer"
	}
	f := fitter{tok: l.tok, enc: req.Encoding}
	text, err := f.fit(annotation(req.Messages), req.TargetTokens)
	if err != nil {
		// Counting worked in validateRequest; should it fail now, an
		// annotation over the budget beats none.
		text = annotation(req.Messages)
	}
	return memory.Summary{Text: text, Method: memory.SummaryAnnotation, Note: why + "; wrote an annotation"}, nil
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// piece is a run of transcript text and its token count.
type piece struct {
	text   string
	tokens int
}

// job is what every call of one request shares.
type job struct {
	f      fitter
	about  string // "12 messages, 2026-01-02 10:00 – 10:30 UTC"
	prompt string // the agent's current prompt, cut to maxPromptTokens
}

func (l *LLM) summarize(ctx context.Context, req memory.SummaryRequest) (string, error) {
	f := fitter{tok: l.tok, enc: req.Encoding}
	j := job{f: f, about: plural(countMessages(req.Messages), "message")}
	if tr := timeRange(req.Messages); tr != "" {
		j.about += ", " + tr
	}
	prompt, err := f.fit(req.Prompt, maxPromptTokens)
	if err != nil {
		return "", err
	}
	j.prompt = prompt
	var pieces []piece
	for _, m := range req.Messages {
		if m == nil {
			continue
		}
		if b := messageBlock(m); b != "" {
			n, err := f.count(b)
			if err != nil {
				return "", err
			}
			pieces = append(pieces, piece{b, n})
		}
	}
	if len(pieces) == 0 {
		return "", errors.New("nothing to summarize: every message is empty")
	}
	return l.condense(ctx, j, pieces, req.TargetTokens, 0)
}

// condense summarizes pieces in target tokens: in one call if they fit a
// call, else by summarizing parts of them (each in its share of the target)
// and condensing the part summaries, a stage deeper.
func (l *LLM) condense(ctx context.Context, j job, pieces []piece, target, stage int) (string, error) {
	total := 0
	for _, p := range pieces {
		total += p.tokens + 1
	}
	room, err := l.room(j, stage, 0, 0, target)
	if err != nil {
		return "", err
	}
	if total <= room {
		sys, user := l.prompts(j, stage, 0, 0, target, joinPieces(pieces))
		return l.call(ctx, j.f, sys, user, target)
	}
	if stage >= maxStages {
		return "", fmt.Errorf("input still %d tokens after %d stages", total, stage)
	}
	// Sum of the parts' targets at most half a call's room, so the merge
	// call fits (bar the minimum per part).
	partRoom, err := l.room(j, stage+1, 99, 99, target)
	if err != nil {
		return "", err
	}
	budget := min(target, partRoom/2)
	parts, err := splitParts(j.f, pieces, partRoom)
	if err != nil {
		return "", err
	}
	sums := make([]string, len(parts))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, parallelParts)
	)
	for i, p := range parts {
		pt := max(minPartTarget, budget*p.tokens/total)
		sys, user := l.prompts(j, stage+1, i+1, len(parts), pt, p.text)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-cctx.Done():
				return
			}
			s, err := l.call(cctx, j.f, sys, user, pt)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("part %d of %d: %w", i+1, len(parts), err)
				cancel() // one part lost is the whole summary lost: stop the rest
			}
			sums[i] = s
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if firstErr != nil {
		return "", firstErr
	}
	next := make([]piece, len(sums))
	for i, s := range sums {
		text := fmt.Sprintf("Part %d of %d:\n%s", i+1, len(sums), s)
		n, err := j.f.count(text)
		if err != nil {
			return "", err
		}
		next[i] = piece{text, n}
	}
	return l.condense(ctx, j, next, target, stage+1)
}

func joinPieces(ps []piece) string {
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.text
	}
	return strings.Join(texts, "\n")
}

// room is how many transcript tokens a call's prompt leaves.
func (l *LLM) room(j job, stage, part, parts, target int) (int, error) {
	sys, user := l.prompts(j, stage, part, parts, target, "")
	a, err := j.f.count(sys)
	if err != nil {
		return 0, err
	}
	b, err := j.f.count(user)
	if err != nil {
		return 0, err
	}
	r := l.cfg.MaxInputTokens - a - b - 2*memory.MessageOverhead - memory.ReplyPriming
	if r < minMaxInputTokens/2 {
		return 0, fmt.Errorf("max input tokens %d leaves %d for the transcript after the instructions", l.cfg.MaxInputTokens, r)
	}
	return r, nil
}

// splitParts packs pieces into parts of about equal tokens, none over room,
// cutting pieces that are bigger than a part on their own.
func splitParts(f fitter, pieces []piece, room int) ([]piece, error) {
	total := 0
	for _, p := range pieces {
		total += p.tokens + 1
	}
	n := (total + room - 1) / room
	share := (total + n - 1) / n
	var flat []piece
	for _, p := range pieces {
		if p.tokens < share {
			flat = append(flat, p)
			continue
		}
		chunks, err := f.chunk(p.text, share)
		if err != nil {
			return nil, err
		}
		flat = append(flat, chunks...)
	}
	var parts []piece
	var cur []piece
	curTok := 0
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, piece{joinPieces(cur), curTok})
			cur, curTok = nil, 0
		}
	}
	for _, p := range flat {
		next := curTok + p.tokens + 1
		// Close the part when p would overflow it, or would take it further
		// from an even share than it is now.
		if len(cur) > 0 && (next > room || next-share > share-curTok) {
			flush()
			next = p.tokens + 1
		}
		cur = append(cur, p)
		curTok = next
	}
	flush()
	return parts, nil
}

// chunk cuts text into pieces of at most max tokens at the coarsest
// boundary available: lines, then sentences, then words, then bytes (a
// token is at least one byte, so max bytes are at most max tokens).
func (f fitter) chunk(text string, max int) ([]piece, error) {
	n, err := f.count(text)
	if err != nil {
		return nil, err
	}
	if n <= max {
		return []piece{{text, n}}, nil
	}
	var subs []string
	var sep string
	switch {
	case strings.Contains(text, "\n"):
		subs, sep = strings.Split(text, "\n"), "\n"
	case len(splitSentences(text)) > 1:
		subs, sep = splitSentences(text), " "
	case len(strings.Fields(text)) > 1:
		subs, sep = strings.Fields(text), " "
	default:
		for len(text) > 0 {
			cut := min(max, len(text))
			for cut < len(text) && cut > 1 && !isRuneStart(text[cut]) {
				cut--
			}
			subs = append(subs, text[:cut])
			text = text[cut:]
		}
		sep = ""
	}
	var out []piece
	var cur strings.Builder
	curTok := 0
	for _, s := range subs {
		ps, err := f.chunk(s, max)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if cur.Len() > 0 && curTok+p.tokens+1 > max {
				out = append(out, piece{cur.String(), curTok})
				cur.Reset()
				curTok = 0
			}
			if cur.Len() > 0 {
				cur.WriteString(sep)
				curTok++
			}
			cur.WriteString(p.text)
			curTok += p.tokens
		}
	}
	if cur.Len() > 0 {
		out = append(out, piece{cur.String(), curTok})
	}
	return out, nil
}

// errEmpty is an answer with no text; worth another try.
var errEmpty = errors.New("empty answer")

// call asks the model once, retrying what may pass on a retry, and trims
// the answer to target tokens.
func (l *LLM) call(ctx context.Context, f fitter, sys, user string, target int) (string, error) {
	req := openai.ChatCompletionRequest{
		Model: l.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: sys},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
	}
	if l.sampling {
		req.Temperature = l.cfg.Temperature
		// Room to overshoot a little: trimming at a line is better than the
		// server cutting mid-word.
		//lint:ignore SA1019 max_tokens is what local OpenAI-compatible servers accept
		req.MaxTokens = target + target/2 + 64
	}
	for attempt := 0; ; attempt++ {
		resp, err := l.client.CreateChatCompletion(ctx, req)
		if err == nil {
			err = errEmpty
			if len(resp.Choices) > 0 {
				if text := cleanAnswer(resp.Choices[0].Message.Content); text != "" {
					out, err := f.fit(text, target)
					if err == nil && out == "" {
						err = fmt.Errorf("no part of the answer fits %d tokens", target)
					}
					return out, err
				}
			}
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !retryable(err) || attempt >= l.retries {
			return "", fmt.Errorf("chat completion (%d attempts): %w", attempt+1, err)
		}
		wait := min(maxBackoff, l.cfg.Backoff<<attempt)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// retryable reports whether err may pass on a retry: timeouts, dropped
// connections, rate limits and server errors. Bad requests, auth failures
// and unknown models will fail again.
func retryable(err error) bool {
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	switch {
	case errors.Is(err, errEmpty), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	case errors.As(err, &netErr):
		return true
	}
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooEarly || status == http.StatusTooManyRequests || status >= 500
}

var (
	reThink    = regexp.MustCompile(`(?s)^\s*<think>.*?</think>`)
	rePreamble = regexp.MustCompile(`(?i)^(?:here(?:'s| is)|sure|certainly|below is)\b[^\n]*:\s*\n`)
)

// cleanAnswer drops what models add despite the instructions: a reasoning
// block (DeepSeek-R1, Qwen3 served without a reasoning parser) and a
// "Here is the summary:" line.
func cleanAnswer(s string) string {
	s = reThink.ReplaceAllString(s, "")
	s = strings.TrimSpace(s)
	s = rePreamble.ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}
