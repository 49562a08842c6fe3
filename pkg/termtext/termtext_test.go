package termtext

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ✓ → ≥ é":            "plain text, ✓ → ≥ é",
		"a\tb":                           "a\tb",
		"erase\x1b[2K\rline":             `erase\x1b[2K\rline`,
		"clip\x1b]52;c;aGk=\x07":         `clip\x1b]52;c;aGk=\x07`,
		"two\nlines":                     `two\nlines`,
		"csi\u009b31m rlo\u202e del\x7f": `csi\x9b31m rlo\u202e del\x7f`,
		"bad\xffbyte":                    `bad\xffbyte`,
		"":                               "",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

type word string

type named struct{ s string }

func (n named) String() string { return n.s }

func TestFprintfEscapesTextArguments(t *testing.T) {
	var b bytes.Buffer
	Fprintf(&b, "%s|%s|%v|%v|%d|%v|%s|%d|%s\n", "a\x1bb", word("w\x07"), []string{"x\ny"}, errors.New("e\rr"), 3, true, named{"n\x1b"}, time.Second, time.Second)
	if got, want := b.String(), "a\\x1bb|w\\x07|[x\\ny]|e\\rr|3|true|n\\x1b|1000000000|1s\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
