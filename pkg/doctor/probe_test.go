package doctor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/observe"
)

// The last canary check says why the state could not be read or decoded, not
// that no pass saw a canary yet.
func TestLastCanaryReportsStateErrors(t *testing.T) {
	for name, c := range map[string]struct {
		status int
		body   string
		want   string
	}{
		"forbidden":   {http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps is forbidden","reason":"Forbidden","code":403}`, "forbidden"},
		"undecodable": {http.StatusOK, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"st","namespace":"ns"},"data":{"state.json":"{not json"}}`, "state.json"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			fmt.Fprint(w, c.body)
		}))
		client, err := kube.New(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		d := &Doctor{Observer: &observe.Observer{Client: client, Namespace: "ns"}, Needs: Needs{StateConfigMap: "st"}}
		d.lastCanary(context.Background())
		srv.Close()
		if len(d.results) != 1 || !strings.Contains(d.results[0].Detail, c.want) || strings.Contains(d.results[0].Detail, "no pass has seen") {
			t.Errorf("%s: %+v, want the error (%q)", name, d.results, c.want)
		}
	}
}
