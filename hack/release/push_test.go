package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestPushEndsAtItsTimeout: a registry that accepts the connection and never
// answers must not hang the release: push gives up at --timeout, saying so.
// (test/release pushes to a real registry; this is the one thing it cannot show.)
func TestPushEndsAtItsTimeout(t *testing.T) {
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never answered
		}
	}()

	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- pushCommand([]string{"--layout", dir, "--ref", l.Addr().String() + "/agentenv/scheduler-watchdog:test", "--insecure", "--timeout", "1s"})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("push to a silent registry: %v, want the deadline named", err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("push gave up after %s, --timeout 1s", took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("push to a silent registry still running after 60 s (--timeout 1s)")
	}
}
