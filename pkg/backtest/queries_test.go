package backtest

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultQueriesMatchNamesLiterally: the default selectors match the
// scheduler's pods and EndpointSlices by name prefix with =~; a name's regex
// metacharacters (a Deployment's name may hold dots) are matched as themselves,
// so sched.v2 does not also read the history of schedXv2's pods.
func TestDefaultQueriesMatchNamesLiterally(t *testing.T) {
	q := DefaultQueries("ns", "sched.v2", "nodes", 9000)
	matcher := regexp.MustCompile(`pod=~("(?:[^"\\]|\\.)*")`)
	for _, selector := range []string{q.StartTime, q.PodReady} {
		m := matcher.FindStringSubmatch(selector)
		if m == nil {
			t.Fatalf("no pod=~ matcher in %s", selector)
		}
		pattern, err := strconv.Unquote(m[1]) // PromQL strings unquote as Go's do
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile("^(?:" + pattern + ")$") // Prometheus anchors its regexes
		for pod, want := range map[string]bool{"sched.v2-7d9c4-x2k8p": true, "schedXv2-7d9c4-x2k8p": false, "sched.v2": false} {
			if re.MatchString(pod) != want {
				t.Errorf("%s: pod=~%s matches %s: %v, want %v", selector, m[1], pod, !want, want)
			}
		}
	}
	if !strings.Contains(q.Expected, `endpointslice=~"nodes-.+"`) {
		t.Errorf("EndpointSlice matcher changed for a plain name: %s", q.Expected)
	}
}
