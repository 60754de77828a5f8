package memory

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// Names are what a coding agent reuses from earlier tool output: file paths
// and code identifiers (snake_case or camelCase). An output's other lines
// (prose, numbers, blank and decoration lines) are rarely needed again
// verbatim. The rules are the language of code, not of any one run:
// identifiers of six or more characters that join words (an underscore
// inside, or a lower-case letter followed by an upper-case one), and paths
// (a slash between name characters, or a name with a file extension).

// nameSpan is one name's place in a line, in bytes.
type nameSpan struct{ start, end int }

// lineNames finds the names in one line.
func lineNames(line string) []nameSpan {
	var out []nameSpan
	i := 0
	for i < len(line) {
		c := line[i]
		if !isNameByte(c) {
			i++
			continue
		}
		j := i
		for j < len(line) && (isNameByte(line[j]) || line[j] == '/' || line[j] == '.' || line[j] == '-') {
			j++
		}
		w := strings.TrimRight(line[i:j], ".-/")
		if isPath(w) || isIdentifier(w) {
			out = append(out, nameSpan{i, i + len(w)})
		} else {
			// a word joined by punctuation may hold an identifier
			// (config.DEBUG_MODE, a.b.some_name): look at its parts
			out = append(out, identifierParts(line, i, i+len(w))...)
		}
		i = j
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isIdentifier: six or more name characters, not starting with a digit,
// joining words.
func isIdentifier(w string) bool {
	if len(w) < 6 || w[0] >= '0' && w[0] <= '9' {
		return false
	}
	for i := 0; i < len(w); i++ {
		if !isNameByte(w[i]) {
			return false
		}
	}
	if strings.Contains(strings.Trim(w, "_"), "_") {
		return true
	}
	for i := 1; i < len(w); i++ {
		if unicode.IsLower(rune(w[i-1])) && unicode.IsUpper(rune(w[i])) {
			return true
		}
	}
	return false
}

// fileExtensions are the extensions that make a bare name a file name.
var fileExtensions = map[string]bool{"py": true, "pyi": true, "js": true, "ts": true, "tsx": true, "jsx": true, "go": true,
	"rs": true, "java": true, "kt": true, "c": true, "h": true, "cc": true, "cpp": true, "hpp": true, "cs": true, "rb": true,
	"php": true, "swift": true, "scala": true, "sh": true, "sql": true, "rst": true, "txt": true, "cfg": true, "toml": true,
	"ini": true, "json": true, "yaml": true, "yml": true, "md": true, "html": true, "css": true, "xml": true, "lock": true, "mod": true}

// isPath: a/b (a slash between name characters) or name.ext.
func isPath(w string) bool {
	if k := strings.IndexByte(w, '/'); k > 0 && k < len(w)-1 {
		return true
	}
	dot := strings.LastIndexByte(w, '.')
	return dot > 0 && fileExtensions[w[dot+1:]] && !strings.ContainsAny(w, "/")
}

func identifierParts(line string, from, to int) []nameSpan {
	var out []nameSpan
	i := from
	for i < to {
		for i < to && !isNameByte(line[i]) {
			i++
		}
		j := i
		for j < to && isNameByte(line[j]) {
			j++
		}
		if j > i && isIdentifier(line[i:j]) {
			out = append(out, nameSpan{i, j})
		}
		i = j
	}
	return out
}

// Long lines keep the text around each name, not the whole line: a
// minified file or a long log line would otherwise spend the budget on
// one line.
const (
	maxSalientLine = 320 // bytes; a line up to this long is kept whole
	nameContext    = 100 // bytes kept on each side of a name in a longer line
)

// salientLines returns the lines of text that hold names, trimmed of
// surrounding space, long ones cut to the parts around their names.
func salientLines(text string) []string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		names := lineNames(line)
		if len(names) == 0 {
			continue
		}
		if len(line) <= maxSalientLine {
			out = append(out, line)
			continue
		}
		var parts []string
		lo, hi := -1, -1
		flush := func() {
			if lo >= 0 {
				parts = append(parts, strings.ToValidUTF8(line[lo:hi], ""))
			}
		}
		for _, n := range names {
			a, b := max(0, n.start-nameContext), min(len(line), n.end+nameContext)
			if lo >= 0 && a <= hi {
				hi = max(hi, b)
				continue
			}
			flush()
			lo, hi = a, b
		}
		flush()
		out = append(out, strings.Join(parts, " … "))
	}
	return out
}

// named is a text's salient lines, the names each holds (as hashes: a
// late call looks up thousands of names, and hashing strings was most of
// its cost), and each distinct name once at the first line holding it.
type named struct {
	text   string // the text they were read from: an edited message misses the cache
	lines  []string
	hashes [][]uint64 // per line, its names' hashes
	uniq   []nameAt
	// toks is each line's token count with the newline that follows it in
	// a digest, 0 until a digest first weighs it.
	// The counts are the message's session's encoding: a session whose
	// encoding changed sees stale counts, which only shifts the estimate
	// (the digest is counted exactly before it is used).
	toks []atomic.Int32
}

// nameAt is a distinct name (its hash) and the first line that holds it.
type nameAt struct {
	h    uint64
	line int
}

// nameSeed seeds the names' hashes: 64 bits make a collision (two names
// taken for one) negligible among a window's few thousand names.
var nameSeed = maphash.MakeSeed()

// namesOf reads text's salient lines and names.
func namesOf(text string) *named {
	n := &named{text: text, lines: salientLines(text)}
	n.hashes = make([][]uint64, len(n.lines))
	n.toks = make([]atomic.Int32, len(n.lines))
	seen := map[uint64]bool{}
	for i, l := range n.lines {
		for _, sp := range lineNames(l) {
			h := maphash.String(nameSeed, l[sp.start:sp.end])
			n.hashes[i] = append(n.hashes[i], h)
			if !seen[h] {
				seen[h] = true
				n.uniq = append(n.uniq, nameAt{h, i})
			}
		}
	}
	return n
}

// lineTokens is line i's token count in enc, with a newline after it,
// counted once.
func (n *named) lineTokens(tok Tokenizer, enc string, i int) (int, error) {
	if c := n.toks[i].Load(); c > 0 {
		return int(c), nil
	}
	c, err := tok.Count(enc, n.lines[i]+"\n")
	if err != nil {
		return 0, fmt.Errorf("count a digest line: %w", err)
	}
	c = max(c, 1)
	n.toks[i].Store(int32(c))
	return c, nil
}

// salientKey names one text of a message: its content (part 0) or the
// arguments of its tool call part-1.
type salientKey struct {
	id   string
	part int
}

// salientCache keeps the names of recent messages' texts: a tool loop's
// window reads the same ~100 outputs on every call, and finding their names
// was a third of a late call's cost.
type salientCache struct {
	mu    sync.Mutex
	m     map[salientKey]*named
	bytes int // what the entries of m hold (see named.size)
	limit int // 0: maxSalientBytes
}

// maxSalientBytes bounds the cache by what its entries hold; when full it
// starts over (the next calls refill it with what they use). It was 20,000
// entries, which kept each entry's whole text: 20,000 tool outputs of 50 kB
// were a gigabyte. 32 MiB holds ~100 outputs of ~30 kB in each of ten busy
// sessions' windows.
const maxSalientBytes = 32 << 20

func (c *salientCache) get(id string, part int, text string) *named {
	k := salientKey{id, part}
	c.mu.Lock()
	n := c.m[k]
	c.mu.Unlock()
	if n != nil && n.text == text {
		return n
	}
	n = namesOf(text)
	size := n.size()
	limit := cmp.Or(c.limit, maxSalientBytes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > limit {
		return n // larger than the whole cache: not kept
	}
	if old := c.m[k]; old != nil {
		c.bytes -= old.size()
	}
	if c.m == nil || c.bytes+size > limit {
		c.m, c.bytes = map[salientKey]*named{}, 0
	}
	c.m[k] = n
	c.bytes += size
	return n
}

// size is what n holds, about: its text (lines are cut from it, or copies
// no longer than it), each line's slice headers and hashes, and its names.
func (n *named) size() int {
	const entry = 128 // n itself and its place in the cache's map
	size := entry + 2*len(n.text) + len(n.lines)*(16+24+4) + len(n.uniq)*16
	for _, h := range n.hashes {
		size += len(h) * 8
	}
	return size
}

// countCache keeps the token counts of short texts a window repeats on
// every call (the digest's header, the command above each output's lines):
// counting them again was a third of what a late digest cost.
type countCache struct {
	mu    sync.Mutex
	m     map[[2]string]int // by encoding and text
	bytes int               // the keys' bytes and countEntry each
	limit int               // 0: maxCountBytes
}

// maxCountBytes bounds the cache by its keys' bytes (it was 10,000
// entries, whatever their length); when full it starts over.
const maxCountBytes = 4 << 20

// countEntry is what an entry of countCache costs beside its text.
const countEntry = 80

func (c *countCache) count(tok Tokenizer, enc, text string) (int, error) {
	k := [2]string{enc, text}
	c.mu.Lock()
	n, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := tok.Count(enc, text)
	if err != nil {
		return 0, err
	}
	size := countEntry + len(enc) + len(text)
	limit := cmp.Or(c.limit, maxCountBytes)
	if size > limit {
		return n, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		if c.m == nil || c.bytes+size > limit {
			c.m, c.bytes = map[[2]string]int{}, 0
		}
		c.bytes += size
	}
	c.m[k] = n
	return n, nil
}
