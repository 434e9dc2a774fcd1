package mcpfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// span is the byte range [start, end) of a piece of a file.
type span struct{ start, end int }

// member is one member of a JSON object, located in its file.
type member struct {
	name  string // the key, decoded
	key   span   // the key as written, quotes included
	value span
}

// object is a JSON object located in its file: the offsets of its braces
// and its members in file order (a repeated key is listed each time).
type object struct {
	open, close int
	members     []member
}

// last returns the index of the last member named name, or -1.
func (o *object) last(name string) int {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].name == name {
			return i
		}
	}
	return -1
}

// The scanner below walks JSON that json.Valid accepted: it never checks
// syntax and never runs past the end of valid input.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// skipString returns the offset after the string that starts at i.
func skipString(data []byte, i int) int {
	for i++; ; i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the offset after the value that starts at i.
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(data) && !isSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
		i++
	}
	return i
}

// parseObject locates the object that starts at data[i] ('{').
func parseObject(data []byte, i int) object {
	o := object{open: i}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		o.close = i
		return o
	}
	for {
		key := span{i, skipString(data, i)}
		var name string
		_ = json.Unmarshal(data[key.start:key.end], &name) // a valid JSON string
		i = skipSpace(data, key.end) + 1                   // the colon
		i = skipSpace(data, i)
		value := span{i, skipValue(data, i)}
		o.members = append(o.members, member{name: name, key: key, value: value})
		i = skipSpace(data, value.end)
		if data[i] != ',' {
			o.close = i
			return o
		}
		i = skipSpace(data, i+1)
	}
}

// kind names the JSON type of the value that starts at data[i].
func kind(data []byte, i int) string {
	switch data[i] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// SyntaxError reports a file that is not valid JSON, where the JSON
// decoder found the problem.
type SyntaxError struct {
	Line, Column int
	Err          error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at line %d, column %d: %v", e.Line, e.Column, e.Err)
}

// Unwrap returns Err.
func (e *SyntaxError) Unwrap() error { return e.Err }

// checkSyntax returns a *SyntaxError when data is not one valid JSON
// value.
func checkSyntax(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	var syn *json.SyntaxError
	off := len(data)
	if errors.As(err, &syn) && !strings.Contains(syn.Error(), "unexpected end") {
		off = int(syn.Offset) - 1 // Offset counts the bad byte; at the end there is none
	}
	if err == nil { // cannot happen: json.Valid said no
		err = errors.New("not a JSON value")
	}
	line, col := 1, 1
	for _, c := range data[:max(0, min(off, len(data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Column: col, Err: err}
}
