package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// A receiver that never answers (a black-holed webhook) must not cost the run's
// own page its other sinks: the alerts kept for it are retried first, and each
// retry waits out its whole delivery budget. Swept over how many alerts the
// outbox holds for the dead receiver (up to its bound): the run's new page
// reaches Slack, which answers, within the run's send window every time.
func TestADeadReceiverDoesNotStarveTheRunsOwnPage(t *testing.T) {
	var mu sync.Mutex
	var slackGot int
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		slackGot++
		mu.Unlock()
	}))
	defer slack.Close()
	stop := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select { // answers nothing until the client gives up
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer dead.Close()
	defer close(stop)

	for _, pending := range []int{0, 1, 5, state.MaxOutbox} {
		mu.Lock()
		slackGot = 0
		mu.Unlock()
		slackSink := &Slack{Poster: NewPoster("slack", slack.URL, 200*time.Millisecond, DefaultAttempts, time.Second)}
		webhook := &Webhook{Poster: NewPoster("webhook", dead.URL, 200*time.Millisecond, DefaultAttempts, time.Second), Now: time.Now}
		d := &Dispatcher{Sinks: []alert.Sink{slackSink, webhook}}
		now := time.Now()
		s := state.New()
		for i := range pending {
			n := goldenNotification()
			n.ID, n.Time = fmt.Sprintf("old%013d", i), now.Add(-time.Duration(pending-i)*time.Minute)
			payload, err := json.Marshal(n)
			if err != nil {
				t.Fatal(err)
			}
			s.Outbox = append(s.Outbox, state.Pending{ID: n.ID, Event: n.Event, CreatedAt: n.Time, Attempts: 1, Sinks: []string{"webhook"}, Payload: payload})
		}
		d.SendBy = now.Add(3 * time.Second)
		n := goldenNotification()
		n.ID, n.Time = "new0000000000000", now
		d.Deliver(context.Background(), s, []alert.Notification{n}, now)
		mu.Lock()
		got := slackGot
		mu.Unlock()
		if got != 1 {
			t.Errorf("%d alerts pending for the dead webhook: Slack got %d posts of the run's new page, want 1", pending, got)
		}
		if len(s.Outbox) > state.MaxOutbox+1 || len(s.Outbox) < min(pending+1, state.MaxOutbox) {
			t.Errorf("%d alerts pending for the dead webhook: outbox holds %d after the run", pending, len(s.Outbox))
		}
	}
}
