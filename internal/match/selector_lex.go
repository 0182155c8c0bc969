package match

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tKeyword // text holds the upper-cased keyword
	tString  // text holds the unescaped value
	tInt     // text holds the digits as written (decimal or 0x hex)
	tFloat
	tOp // = <> < <= > >= + - * / ( ) ,
)

type token struct {
	kind tokKind
	pos  int    // byte offset in the source
	raw  string // source text of the token
	text string
}

// reserved words; keywords are case-insensitive.
var selectorKeywords = map[string]bool{
	"NULL": true, "TRUE": true, "FALSE": true, "NOT": true, "AND": true, "OR": true,
	"BETWEEN": true, "LIKE": true, "IN": true, "IS": true, "ESCAPE": true,
}

func isIdentStart(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return isIdentStart(r) || unicode.IsDigit(r) }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// column converts a byte offset to a 1-based character column.
func column(src string, pos int) int {
	if pos > len(src) {
		pos = len(src)
	}
	return utf8.RuneCountInString(src[:pos]) + 1
}

func lexSelector(src string) ([]token, error) {
	var toks []token
	fail := func(pos int, format string, args ...any) ([]token, error) {
		return nil, &SelectorError{Column: column(src, pos), Msg: fmt.Sprintf(format, args...)}
	}
	i := 0
	for i < len(src) {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r', '\f':
			i++
			continue
		}
		start := i
		switch {
		case c == '\'':
			var sb strings.Builder
			i++
			closed := false
			for i < len(src) {
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						sb.WriteByte('\'')
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				sb.WriteByte(src[i])
				i++
			}
			if !closed {
				return fail(start, "unterminated string literal")
			}
			if !utf8.ValidString(sb.String()) {
				return fail(start, "string literal is not valid UTF-8")
			}
			toks = append(toks, token{kind: tString, pos: start, raw: src[start:i], text: sb.String()})
			continue
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			kind := tInt
			if c == '0' && i+1 < len(src) && (src[i+1] == 'x' || src[i+1] == 'X') {
				i += 2
				for i < len(src) && isHex(src[i]) {
					i++
				}
				if i == start+2 {
					return fail(start, "malformed hexadecimal literal %q", src[start:i])
				}
			} else {
				for i < len(src) && isDigit(src[i]) {
					i++
				}
				if i < len(src) && src[i] == '.' {
					kind = tFloat
					i++
					for i < len(src) && isDigit(src[i]) {
						i++
					}
				}
				if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
					kind = tFloat
					i++
					if i < len(src) && (src[i] == '+' || src[i] == '-') {
						i++
					}
					d := i
					for i < len(src) && isDigit(src[i]) {
						i++
					}
					if i == d {
						return fail(start, "malformed number %q: exponent has no digits", src[start:i])
					}
				}
			}
			if i < len(src) {
				r, n := utf8.DecodeRuneInString(src[i:])
				if r == '.' || isIdentPart(r) {
					return fail(start, "malformed number %q", src[start:i+n])
				}
			}
			toks = append(toks, token{kind: kind, pos: start, raw: src[start:i], text: src[start:i]})
			continue
		}
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && n == 1 {
			return fail(i, "invalid UTF-8")
		}
		if isIdentStart(r) {
			i += n
			for i < len(src) {
				r, n := utf8.DecodeRuneInString(src[i:])
				if !isIdentPart(r) {
					break
				}
				i += n
			}
			word := src[start:i]
			if up := strings.ToUpper(word); selectorKeywords[up] {
				toks = append(toks, token{kind: tKeyword, pos: start, raw: word, text: up})
			} else {
				toks = append(toks, token{kind: tIdent, pos: start, raw: word, text: word})
			}
			continue
		}
		op := ""
		switch c {
		case '=', '+', '-', '*', '/', '(', ')', ',':
			op = src[i : i+1]
		case '<':
			op = "<"
			if i+1 < len(src) && (src[i+1] == '>' || src[i+1] == '=') {
				op = src[i : i+2]
			}
		case '>':
			op = ">"
			if i+1 < len(src) && src[i+1] == '=' {
				op = ">="
			}
		case '!':
			if i+1 < len(src) && src[i+1] == '=' {
				return fail(i, "unexpected \"!=\"; use <> for inequality")
			}
		case '"':
			return fail(i, "unexpected '\"'; string literals use single quotes")
		}
		if op == "" {
			return fail(i, "unexpected character %q", r)
		}
		i += len(op)
		toks = append(toks, token{kind: tOp, pos: start, raw: op, text: op})
	}
	toks = append(toks, token{kind: tEOF, pos: len(src)})
	return toks, nil
}
