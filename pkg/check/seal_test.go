package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// An editor of the state ConfigMap forges a spent restart budget (the budget gate
// then holds the restart for an hour) and a send in the future on every alert.
// With the key the document's seal fails: it is kept aside, the run decides from a
// fresh state (the wedge clock starts over), pages watchdog-error naming the
// tampering once, and the restart comes when the wedge is due again. The same
// forgery without a key holds the restart (the control: the test can fail).
func TestTamperedStateIsSetAsideAndPaged(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		h := newHarness(t)
		h.store.Key = key
		h.wedgedAndDue()
		data := h.store.Data()
		s, err := state.Decode([]byte(data[statestore.DataKey]))
		if err != nil {
			t.Fatal(err)
		}
		future := h.clk.Now().Add(24 * time.Hour)
		for _, uid := range []string{"x", "y", "z"} {
			s.Restarts = append(s.Restarts, state.Restart{Pod: "p-" + uid, UID: uid, Method: "delete", ClaimedAt: h.clk.Now(), Outcome: state.RestartDone})
		}
		for _, a := range s.Alerts {
			a.LastSentAt = &future
		}
		forged, _ := state.Encode(s, h.clk.Now())
		data[statestore.DataKey] = string(forged) // the seal stays as the watchdog wrote it
		h.store.SetData(data)
		sent := len(h.sink.events())

		rep, err := h.pass()
		if err != nil {
			t.Fatalf("key %t: %v", key != nil, err)
		}
		h.clk.Step(5 * time.Minute)
		if _, err := h.pass(); err != nil {
			t.Fatal(err)
		}
		if key == nil {
			if h.restarts() != 0 {
				t.Fatal("control: without a key the forged budget should hold the restart")
			}
			continue
		}
		if h.restarts() != 1 {
			t.Errorf("the forged state held the restart")
		}
		if !strings.Contains(strings.Join(rep.Warnings, "\n"), "not sealed with the watchdog's key") {
			t.Errorf("warnings %q", rep.Warnings)
		}
		if n := strings.Count(strings.Join(h.sink.events()[sent:], "\n"), alert.EventWatchdogError); n != 1 {
			t.Errorf("watchdog-error paged %d times, want once", n)
		}
		after := h.store.Data()
		if after[statestore.TamperedKey] != string(forged) || after[statestore.SealKey] == data[statestore.SealKey] {
			t.Errorf("the forged document was not kept aside, or the new one not sealed")
		}
	}
}
