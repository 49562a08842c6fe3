package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/pkg/kube"
)

// A failed read-back of the canary is unknown for that sample only: the canary
// is not lost, and the next read-back that finds it unchanged verifies it.
func TestCanaryReadBackErrorIsNotLoss(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd timeout","code":500}`)
			return
		}
		fmt.Fprint(w, `{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"canary","namespace":"ns","uid":"u1","resourceVersion":"7"},"addressType":"IPv4","endpoints":[]}`)
	}))
	defer srv.Close()
	client, err := kube.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	p := &Prober{Client: client, Namespace: "ns", Name: "canary"}
	c := &written{uid: "u1", rv: "7"}
	if err := p.verify(context.Background(), c); err == nil {
		t.Fatal("a failed read-back verified the canary")
	}
	if c.err != nil {
		t.Fatalf("a failed read-back marked the canary lost: %v", c.err)
	}
	fail.Store(false)
	if err := p.verify(context.Background(), c); err != nil || c.err != nil {
		t.Fatalf("read back unchanged: %v, canary %v", err, c.err)
	}
}
