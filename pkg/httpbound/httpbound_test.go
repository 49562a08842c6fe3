package httpbound

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClientCutsTheBody: a body of up to max bytes reads whole; one byte more
// fails with ErrTooLarge, after max bytes, whatever the answer's length.
func TestClientCutsTheBody(t *testing.T) {
	const max = 1000
	for _, size := range []int{0, 1, max - 1, max, max + 1, 10 * max, 1 << 20} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("a", size))
		}))
		resp, err := Client(nil, max).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if size <= max && (err != nil || len(got) != size) {
			t.Errorf("size %d: read %d, %v; want it whole", size, len(got), err)
		}
		if size > max && (!errors.Is(err, ErrTooLarge) || len(got) != max) {
			t.Errorf("size %d: read %d, %v; want %d and ErrTooLarge", size, len(got), err, max)
		}
	}
}
