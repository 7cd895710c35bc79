package http

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a single-pass JSON reader for the push body, the broker's
// hottest input: it validates each value once while walking it and hands out
// payloads as slices of the body, where encoding/json would validate the
// whole body once per Unmarshal and copy every RawMessage.
type scanner struct {
	b      []byte
	i      int
	spaced bool // ws() skipped something
}

var (
	errSyntax  = errors.New("invalid JSON")
	errNotUTF8 = errors.New("invalid UTF-8 in a string")
	// errSurrogate: a \u escape of half a UTF-16 pair with no other half.
	errSurrogate = errors.New("lone UTF-16 surrogate in a string")
	errTooDeep   = errors.New("nesting too deep")
	errTrailing  = errors.New("data after the top-level value")
)

// maxDepth bounds nesting so a hostile body cannot exhaust the stack.
const maxDepth = 512

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end (a NUL byte in the
// body is 0 too: end tells them apart).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// end reports whether only spaces are left.
func (s *scanner) end() bool {
	s.ws()
	return s.i >= len(s.b)
}

func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// str reads a string at the cursor and returns it unescaped.
func (s *scanner) str() (string, error) {
	if !s.consume('"') {
		return "", errSyntax
	}
	start := s.i
	// Fast path: no escapes, plain ASCII or valid UTF-8.
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				return "", errNotUTF8
			}
			return string(v), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", errSyntax
		}
		s.i++
	}
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				return "", errNotUTF8
			}
			return string(out), nil
		case c < 0x20:
			return "", errSyntax
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", errSyntax
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", errSyntax
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate escape followed by a low one is a
				// character; encoding/json would turn a lone one into
				// U+FFFD, making distinct ids equal.
				if s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
					return "", errSurrogate
				}
				s.i += 2
				r2, ok2 := s.hex4()
				if !ok2 {
					return "", errSyntax
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", errSurrogate
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", errSyntax
		}
	}
	return "", errSyntax
}

// knownKeys are the member names of the bodies every push and ack repeats,
// once per item: key hands out these strings instead of allocating one per
// member (a 100-item ack body: 1,012 allocations down to 610, its parse
// about 10% faster; docs/performance.md "The dated record": "2026-12-05, later").
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"items", "queue", "partition", "transactionId", "traceId", "payload",
		"acknowledgments", "partitionId", "status", "consumerGroup", "leaseId", "error"} {
		m[k] = k
	}
	return m
}()

// key reads an object member's name at the cursor as str does.
func (s *scanner) key() (string, error) {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		for j := s.i + 1; j < len(s.b) && s.b[j] != '\\'; j++ {
			if s.b[j] == '"' {
				if k, ok := knownKeys[string(s.b[s.i+1:j])]; ok {
					s.i = j + 1
					return k, nil
				}
				break
			}
		}
	}
	return s.str()
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(n), true
}

// skip validates the value at the cursor and moves past it. Whitespace it
// meets inside the value sets s.spaced.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	s.ws()
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch c := s.b[s.i]; c {
	case '"':
		return s.skipString()
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.i++
		if s.consume(closing) {
			return nil
		}
		for {
			if c == '{' {
				s.ws()
				if err := s.skipString(); err != nil {
					return err
				}
				if !s.consume(':') {
					return errSyntax
				}
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.consume(',') {
				continue
			}
			if s.consume(closing) {
				return nil
			}
			return errSyntax
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// fieldError names the member whose string was refused, so a client learns
// which field to fix.
func fieldError(key string, err error) error {
	if errors.Is(err, errNotUTF8) || errors.Is(err, errSurrogate) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return err
}

// object walks the object at the cursor, calling member with the cursor at
// each member's value; member must consume the value.
func (s *scanner) object(depth int, member func(key string) error) error {
	if depth > maxDepth {
		return errTooDeep
	}
	if !s.consume('{') {
		return errSyntax
	}
	if s.consume('}') {
		return nil
	}
	for {
		s.ws()
		key, err := s.key()
		if err != nil {
			return err
		}
		if !s.consume(':') {
			return errSyntax
		}
		if err := member(key); err != nil {
			return fieldError(key, err)
		}
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return nil
		}
		return errSyntax
	}
}

// array walks the array at the cursor, calling elem with the cursor at each
// element; elem must consume it.
func (s *scanner) array(depth int, elem func() error) error {
	if depth > maxDepth {
		return errTooDeep
	}
	if !s.consume('[') {
		return errSyntax
	}
	if s.consume(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		if s.consume(']') {
			return nil
		}
		return errSyntax
	}
}

func (s *scanner) skipString() error {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return errSyntax
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			if !utf8.Valid(s.b[start:s.i]) {
				return errNotUTF8
			}
			s.i++
			return nil
		case c < 0x20:
			return errSyntax
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return errSyntax
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				s.i += 2
				if _, ok := s.hex4(); !ok {
					return errSyntax
				}
			default:
				return errSyntax
			}
		default:
			s.i++
		}
	}
	return errSyntax
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return errSyntax
	}
	s.i += len(lit)
	return nil
}

// number accepts the JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return errSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return errSyntax
		}
	}
	s.i = i
	return nil
}
