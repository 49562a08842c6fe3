package testenv

import (
	"net"
	"testing"
	"time"
)

// The helpers every test package of this repository shares. Test packages may
// give them short local names (`var must = testenv.Must`), never a second body.

// Must fails the test on a non-nil error.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// MustFixture returns a file of the repository's testdata/ folder.
func MustFixture(t testing.TB, name string) string {
	t.Helper()
	page, err := Fixture(name)
	Must(t, err)
	return page
}

// WaitFor polls cond until it holds, and fails the test when timeout passes
// first: what a test waits for is a condition, not a fixed sleep.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address nothing listens on (at the time of the
// call): for a receiver that refuses connections, or a server started later.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Must(t, err)
	addr := ln.Addr().String()
	Must(t, ln.Close())
	return addr
}
