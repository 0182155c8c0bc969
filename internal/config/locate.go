package config

import (
	"slices"
	"unicode/utf8"
)

// The TOML decoder reports positions for syntax errors only. To point
// semantic errors and unknown keys at a line and column, locate re-reads the
// (already successfully decoded, hence valid) source and records where every
// key is defined. It understands exactly as much TOML as it needs: headers,
// dotted and quoted keys, every string form, arrays and inline tables. Values
// are skipped, never interpreted. On anything it does not expect it stops
// and keeps what it has found: a missing position only makes a message less
// precise.

// keyDef is one definition of a key in the source.
type keyDef struct {
	path []string // full key path, without array indexes
	off  int      // byte offset of the key (or of '[' / '{' for a table)
	// elem is the index of the element of the top-level array of tables
	// path[0] ([[broker]], [[link]]) the key belongs to, or -1.
	elem int
	// inline marks the '{' of an inline table inside an array: the decoder
	// does not list those as keys of their own.
	inline bool
}

// locator maps keys to source positions.
type locator struct {
	src        []byte
	defs       []keyDef
	lineStarts []int
}

func newLocator(src []byte) *locator {
	l := newLineIndex(src)
	s := &scanner{src: src, counts: map[string]int{}}
	s.document()
	l.defs = s.defs
	return l
}

// pos turns a byte offset into a 1-based line and column (in characters).
func (l *locator) pos(off int) (line, col int) {
	off = max(0, min(off, len(l.src)))
	i, found := slices.BinarySearch(l.lineStarts, off)
	if !found {
		i--
	}
	return i + 1, utf8.RuneCount(l.src[l.lineStarts[i]:off]) + 1
}

// field returns the position of key in element elem of the top-level array
// of tables table, e.g. ("broker", 2, "listen").
func (l *locator) field(table string, elem int, key string) (line, col int, ok bool) {
	for _, d := range l.defs {
		if d.elem == elem && len(d.path) == 2 && d.path[0] == table && d.path[1] == key {
			line, col = l.pos(d.off)
			return line, col, true
		}
	}
	return 0, 0, false
}

// elem returns the position of element elem of the top-level array of
// tables table: its [[table]] header or the '{' of its inline table.
func (l *locator) elem(table string, elem int) (line, col int, ok bool) {
	for _, d := range l.defs {
		if d.elem == elem && len(d.path) == 1 && d.path[0] == table {
			line, col = l.pos(d.off)
			return line, col, true
		}
	}
	return 0, 0, false
}

// nth returns the position and element of the n-th (0-based) definition of
// the key path, counting as the decoder's MetaData.Keys does.
func (l *locator) nth(path []string, n int) (line, col, elem int, ok bool) {
	for _, d := range l.defs {
		if d.inline || !slices.Equal(d.path, path) {
			continue
		}
		if n == 0 {
			line, col = l.pos(d.off)
			return line, col, d.elem, true
		}
		n--
	}
	return 0, 0, -1, false
}

// scanner walks valid TOML recording key definitions. Every loop consumes
// at least one byte or stops, so it terminates on any input.
type scanner struct {
	src    []byte
	i      int
	bad    bool // stop: something unexpected
	table  []string
	counts map[string]int // top-level array of tables → elements seen
	defs   []keyDef
}

func (s *scanner) peek(k int) byte {
	if s.i+k < len(s.src) {
		return s.src[s.i+k]
	}
	return 0
}

func (s *scanner) eof() bool { return s.bad || s.i >= len(s.src) }

func (s *scanner) has(prefix string) bool {
	return len(s.src)-s.i >= len(prefix) && string(s.src[s.i:s.i+len(prefix)]) == prefix
}

// skip skips spaces and tabs, and with nl also newlines and comments.
func (s *scanner) skip(nl bool) {
	for !s.eof() {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t':
			s.i++
		case nl && (c == '\n' || c == '\r'):
			s.i++
		case nl && c == '#':
			for !s.eof() && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

func (s *scanner) elemOf(path []string) int {
	if len(path) == 0 {
		return -1
	}
	if n, ok := s.counts[path[0]]; ok {
		return n - 1
	}
	return -1
}

func (s *scanner) record(path []string, off int, inline bool) {
	s.defs = append(s.defs, keyDef{path: path, off: off, elem: s.elemOf(path), inline: inline})
}

func (s *scanner) document() {
	if s.has("\xef\xbb\xbf") { // byte order mark
		s.i += 3
	}
	for {
		s.skip(true)
		if s.eof() {
			return
		}
		if s.peek(0) == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
	}
}

func (s *scanner) header() {
	off := s.i
	array := s.peek(1) == '['
	if array {
		s.i += 2
	} else {
		s.i++
	}
	s.skip(false)
	key := s.key()
	s.skip(false)
	if s.bad || len(key) == 0 {
		s.bad = true
		return
	}
	if array {
		if !s.has("]]") {
			s.bad = true
			return
		}
		s.i += 2
		if len(key) == 1 {
			s.counts[key[0]]++
		}
	} else {
		if !s.has("]") {
			s.bad = true
			return
		}
		s.i++
	}
	s.table = key
	s.record(key, off, false)
}

// keyValue reads `key = value` inside table prefix.
func (s *scanner) keyValue(prefix []string) {
	off := s.i
	key := s.key()
	s.skip(false)
	if s.bad || len(key) == 0 || s.peek(0) != '=' {
		s.bad = true
		return
	}
	s.i++
	s.skip(false)
	path := append(slices.Clip(prefix), key...)
	s.record(path, off, false)
	s.value(path)
}

// key reads a dotted key of bare and quoted parts.
func (s *scanner) key() []string {
	var parts []string
	for !s.eof() {
		var part string
		switch c := s.peek(0); {
		case c == '"':
			part = s.basicString()
		case c == '\'':
			part = s.literalString()
		case isBare(c):
			start := s.i
			for !s.eof() && isBare(s.src[s.i]) {
				s.i++
			}
			part = string(s.src[start:s.i])
		default:
			s.bad = true
			return nil
		}
		parts = append(parts, part)
		s.skip(false)
		if s.peek(0) != '.' {
			return parts
		}
		s.i++
		s.skip(false)
	}
	return parts
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value; inline tables record their keys under path.
func (s *scanner) value(path []string) {
	switch {
	case s.has(`"""`):
		s.multiline(`"""`, true)
	case s.has(`'''`):
		s.multiline(`'''`, false)
	case s.peek(0) == '"':
		s.basicString()
	case s.peek(0) == '\'':
		s.literalString()
	case s.peek(0) == '[':
		s.array(path)
	case s.peek(0) == '{':
		s.inlineTable(path)
	default: // number, bool, date-time: up to a delimiter
		start := s.i
		for !s.eof() && !isDelim(s.src[s.i]) {
			s.i++
		}
		if s.i == start {
			s.bad = true
		}
	}
}

func isDelim(c byte) bool {
	return c == ',' || c == ']' || c == '}' || c == '#' || c == '\n' || c == '\r'
}

func (s *scanner) array(path []string) {
	s.i++ // '['
	for {
		s.skip(true)
		if s.eof() {
			s.bad = true
			return
		}
		if s.peek(0) == ']' {
			s.i++
			return
		}
		if s.peek(0) == '{' && len(path) == 1 {
			// An inline array of tables, broker = [{...}, {...}]: each
			// table is one element, as with [[broker]].
			s.counts[path[0]]++
			s.record(path, s.i, true)
		}
		s.value(path)
		s.skip(true)
		switch s.peek(0) {
		case ',':
			s.i++
		case ']':
		default:
			s.bad = true
			return
		}
	}
}

func (s *scanner) inlineTable(path []string) {
	s.i++ // '{'
	for {
		s.skip(true)
		if s.eof() {
			s.bad = true
			return
		}
		if s.peek(0) == '}' {
			s.i++
			return
		}
		s.keyValue(path)
		s.skip(true)
		switch s.peek(0) {
		case ',':
			s.i++
		case '}':
		default:
			s.bad = true
			return
		}
	}
}

// basicString reads "..." and returns its (roughly) unescaped content; only
// keys need the content, and keys rarely hold escapes.
func (s *scanner) basicString() string {
	s.i++ // '"'
	var b []byte
	for !s.eof() {
		c := s.src[s.i]
		switch {
		case c == '"':
			s.i++
			return string(b)
		case c == '\\':
			b = s.escape(b)
		case c == '\n':
			s.bad = true
			return ""
		default:
			b = append(b, c)
			s.i++
		}
	}
	s.bad = true
	return ""
}

// escape decodes one escape sequence at s.i (the backslash).
func (s *scanner) escape(b []byte) []byte {
	c := s.peek(1)
	s.i += 2
	switch c {
	case 'b':
		return append(b, '\b')
	case 't':
		return append(b, '\t')
	case 'n':
		return append(b, '\n')
	case 'f':
		return append(b, '\f')
	case 'r':
		return append(b, '\r')
	case 'e':
		return append(b, 0x1b)
	case 'u', 'U', 'x':
		n := map[byte]int{'u': 4, 'U': 8, 'x': 2}[c]
		if len(s.src)-s.i < n {
			s.bad = true
			return b
		}
		var r rune
		for _, h := range s.src[s.i : s.i+n] {
			r = r<<4 | rune(unhex(h))
		}
		s.i += n
		return utf8.AppendRune(b, r)
	default:
		return append(b, c)
	}
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

func (s *scanner) literalString() string {
	s.i++ // '\''
	start := s.i
	for !s.eof() {
		switch s.src[s.i] {
		case '\'':
			s.i++
			return string(s.src[start : s.i-1])
		case '\n':
			s.bad = true
			return ""
		}
		s.i++
	}
	s.bad = true
	return ""
}

// multiline skips a multi-line string (delim is three quotes); up to two
// extra quotes before the closing delimiter belong to the content.
func (s *scanner) multiline(delim string, escapes bool) {
	s.i += 3
	for !s.eof() {
		if escapes && s.src[s.i] == '\\' {
			s.i += 2
			continue
		}
		if s.has(delim) {
			s.i += 3
			for k := 0; k < 2 && s.peek(0) == delim[0]; k++ {
				s.i++
			}
			return
		}
		s.i++
	}
	s.bad = true
}
