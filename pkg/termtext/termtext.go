// Package termtext makes others' text (log lines, label values, Events, ConfigMap
// edits) safe on a terminal: an escape sequence could rewrite a line, set the
// clipboard (OSC 52) or disguise a link (OSC 8), and a newline forge a line. JSON
// output needs none of this: its encoder escapes control characters.
package termtext

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape writes each unprintable character of s as a Go escape (\x1b, \n, \u202e;
// an invalid byte \xff). A tab is kept: shown, not acted on, and tables use it.
func Escape(s string) string {
	if strings.IndexFunc(s, needsEscape) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape says whether Escape rewrites r.
func needsEscape(r rune) bool { return r != '\t' && (r == utf8.RuneError || !unicode.IsPrint(r)) }

// Fprintf is fmt.Fprintf for a terminal: every text argument (a string of any string
// type, a list of them, an error, a fmt.Stringer that is not a number) is escaped.
func Fprintf(w io.Writer, format string, args ...any) {
	safe := make([]any, len(args))
	for i, a := range args {
		safe[i] = escapeArg(a)
	}
	fmt.Fprintf(w, format, safe...)
}

func escapeArg(a any) any {
	switch v := a.(type) {
	case string:
		return Escape(v)
	case []string:
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = Escape(s)
		}
		return out
	case error:
		return Escape(v.Error())
	}
	rv := reflect.ValueOf(a)
	if s, ok := a.(fmt.Stringer); ok && (rv.Kind() == reflect.String || rv.Kind() == reflect.Struct || rv.Kind() == reflect.Pointer) {
		return Escape(s.String()) // as fmt would print it; not a number (%d of a Duration)
	}
	if rv.Kind() == reflect.String {
		return Escape(rv.String()) // a typed word: state.Verdict, decide.Evidence
	}
	return a
}
