package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMetricsServerClosesIdleConnections: run's metrics server closes a keep-alive
// connection a client leaves idle (Prometheus opens a new one at its next scrape),
// so clients that go quiet cannot pile up connections in a long-lived `run`.
func TestMetricsServerClosesIdleConnections(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newMetricsServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: watchdog\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Wait past the idle timeout (and the header timeout, which an idle connection
	// does not use): the server must have closed it, not left it open.
	wait := max(srv.IdleTimeout, srv.ReadHeaderTimeout) + 3*time.Second
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	start := time.Now()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after %s idle the connection is still open (read: %v); want it closed by the server", time.Since(start).Round(time.Second), err)
	}
}
