package coldstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// maxName is the longest file name most filesystems take (ext4, APFS, NTFS).
const maxName = 255

// ext ends a session's file: JSONL in gzip segments (segment.go).
const ext = ".jsonl.gz"

// legacyExt ended the plain JSONL files of earlier versions: Open turns
// them into segment files, OpenReadOnly reads them as they are.
const legacyExt = ".jsonl"

// legacyPath is the plain file an earlier version wrote for path.
func legacyPath(path string) string { return strings.TrimSuffix(path, ext) + legacyExt }

// escape turns a tenant or session name into one path element. It keeps
// [A-Za-z0-9_-] and '.' (except first) and writes every other byte as %XX,
// like url.PathEscape but stricter:
//   - '/' and '\' never survive, so a name is one element on any OS;
//   - ':' is escaped (not allowed in names on Windows, shown as '/' by macOS);
//   - non-ASCII is escaped, so macOS's Unicode normalization cannot turn two
//     tenants into one file or one tenant into a name we cannot find again;
//   - a leading '.' is escaped, so no name is ".", ".." or hidden, and
//     dotfiles are free for temporary files.
//
// The result is canonical (uppercase hex, only what must be escaped), so
// unescape can refuse any other spelling and two names never share a file.
// Names differing only in case still collide on a case-insensitive
// filesystem; ctxd's data directory is expected on a case-sensitive one.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keep(c) && !(c == '.' && i == 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func keep(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

var errNotEscaped = errors.New("not a name written by coldstore")

// unescape inverts escape and refuses anything escape would not have written.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", errNotEscaped
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", errNotEscaped
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	out := b.String()
	if out == "" || escape(out) != s {
		return "", errNotEscaped
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false // lowercase hex is not canonical
}

// element escapes a name for use as a path element of suffix ext, checking
// what escape already guarantees: that the element stays inside its parent.
func element(kind, name, ext string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("cold store: empty %s name", kind)
	}
	e := escape(name) + ext
	if len(e) > maxName {
		return "", fmt.Errorf("cold store: %s name %.40q... is too long for a file name (%d bytes escaped)", kind, name, len(e))
	}
	if !filepath.IsLocal(e) || strings.ContainsAny(e, `/\`) || e[0] == '.' {
		return "", fmt.Errorf("cold store: %s name %q does not make a safe file name", kind, name)
	}
	return e, nil
}
