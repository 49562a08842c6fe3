package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

// jsonLines parses stderr as one JSON object per line, failing on anything else.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line is not JSON (%v): %q\nwhole stderr:\n%s", err, line, stderr)
		}
		out = append(out, m)
	}
	return out
}

func find(lines []map[string]any, substr string) map[string]any {
	for _, l := range lines {
		if msg, _ := l["message"].(string); strings.Contains(msg, substr) {
			return l
		}
	}
	return nil
}

// client-go logs an API server's Warning header through klog: a command's stderr
// must carry it as a JSON line, like the watchdog's own.
func TestKlogFromClientGoIsJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Warning", `299 - "state ConfigMaps are deprecated (test warning)"`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"agentenv-scheduler-watchdog","namespace":"wd","resourceVersion":"7"}}`)
	}))
	defer srv.Close()
	kubeconfig := writeKubeconfig(t, srv.URL)

	var stdout, stderr bytes.Buffer
	code := ExecuteContext(context.Background(), []string{"status", "--kubeconfig", kubeconfig, "--namespace", "wd", "-o", "json"}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	line := find(jsonLines(t, stderr.String()), "state ConfigMaps are deprecated (test warning)")
	if line == nil {
		t.Fatalf("client-go's warning is not among the JSON lines on stderr:\n%s", stderr.String())
	}
	if line["level"] != "info" || line["source"] != "klog" || line["time"] == nil {
		t.Errorf("klog line %v: want level info, source klog and a time", line)
	}
}

// Every kind of klog call lands as a JSON line at its level, with its key/values.
func TestKlogCallsAreJSON(t *testing.T) {
	var stderr bytes.Buffer
	newLogger(&ClusterOptions{LogLevel: "debug", LogFormat: "json"}, &stderr)
	klog.Warningf("legacy %s", "warning")
	klog.Errorf("legacy %s", "error")
	klog.ErrorS(errors.New("boom"), "structured error", "pod", klog.KRef("wd", "scheduler-0"))
	klog.Background().WithName("reflector").WithValues("resource", "pods").Info("contextual info", "n", 3)
	klog.V(3).Info("below klog's verbosity") // klog's -v (0) drops it before the sink

	lines := jsonLines(t, stderr.String())
	for _, c := range []struct {
		msg, level string
		fields     map[string]any
	}{
		{"legacy warning", "info", nil},
		{"legacy error", "error", nil},
		{"structured error", "error", map[string]any{"error": "boom", "pod": map[string]any{"name": "scheduler-0", "namespace": "wd"}}},
		{"contextual info", "info", map[string]any{"logger": "reflector", "resource": "pods", "n": float64(3)}},
	} {
		l := find(lines, c.msg)
		if l == nil {
			t.Errorf("%q is not on stderr as JSON:\n%s", c.msg, stderr.String())
			continue
		}
		if l["level"] != c.level || l["source"] != "klog" {
			t.Errorf("%q: level %v source %v, want %s klog", c.msg, l["level"], l["source"], c.level)
		}
		for k, v := range c.fields {
			if fmt.Sprint(l[k]) != fmt.Sprint(v) {
				t.Errorf("%q: %s = %v, want %v", c.msg, k, l[k], v)
			}
		}
		if msg := l["message"].(string); strings.HasSuffix(msg, "\n") {
			t.Errorf("%q keeps klog's newline", msg)
		}
	}
	if find(lines, "below klog's verbosity") != nil {
		t.Error("a klog V(3) line got through")
	}

	// --log-level error keeps klog's info lines out too.
	stderr.Reset()
	newLogger(&ClusterOptions{LogLevel: "error", LogFormat: "json"}, &stderr)
	klog.Warning("quiet please")
	klog.Error("loud")
	lines = jsonLines(t, stderr.String())
	if find(lines, "quiet please") != nil || find(lines, "loud") == nil {
		t.Errorf("with --log-level error:\n%s", stderr.String())
	}
}

// writeKubeconfig writes a kubeconfig for a test API server at server (token auth)
// and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
