package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// The test host answers on its own non-loopback address, reached from this
// namespace through the veth pair, and is gone after Close.
func TestNetnsHost(t *testing.T) {
	h, err := NewNetnsHost()
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.Listen()
	if err != nil {
		_ = h.Close()
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "from "+r.Host)
	}))
	srv.Listener = l
	srv.Start()
	if !strings.HasPrefix(srv.URL, "http://"+h.PeerIP+":") {
		t.Errorf("listening on %s, want %s", srv.URL, h.PeerIP)
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET %s: %v", srv.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "from "+h.PeerIP) {
		t.Errorf("answer %q", body)
	}
	srv.Close()
	if err := h.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat("/run/netns/" + h.Name); !os.IsNotExist(err) {
		t.Errorf("namespace %s left behind: %v", h.Name, err)
	}
}
