package deliver

import (
	"context"
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
		d := &Dispatcher{Sinks: []alert.Sink{slackSink, webhook}, Outbox: outboxConfig(outboxKey)}
		now := time.Now()
		s := state.New()
		for i := range pending {
			n := goldenNotification()
			n.ID, n.Time = fmt.Sprintf("old%013d", i), now.Add(-time.Duration(pending-i)*time.Minute)
			p, err := d.Outbox.Pending(n, n.Time, []string{"webhook"}, "timeout")
			if err != nil {
				t.Fatal(err)
			}
			s.Outbox = append(s.Outbox, p)
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

// A page reserved by a run whose clock ran ahead, and left unsent (the run ended
// before sending), is delivered by the next run: it is held as another run's
// only while its date is within the clock skew tolerated, as for every entry
// (a node whose clock ran ahead must not lose the page). Swept over how far
// ahead: within the tolerance it is still that run's, past it delivered.
func TestAReservationDatedAheadIsNotHeldForever(t *testing.T) {
	now := goldenNotification().Time.Add(time.Hour)
	for _, c := range []struct {
		ahead time.Duration
		sent  bool
	}{{0, false}, {30 * time.Second, false}, {10 * time.Minute, true}, {365 * 24 * time.Hour, true}} {
		sink := &memorySink{name: "webhook"}
		d := &Dispatcher{Sinks: []alert.Sink{sink}, Outbox: outboxConfig(outboxKey), ReservedFor: 5 * time.Minute}
		n := goldenNotification()
		n.Time = now.Add(c.ahead)
		s := state.New()
		d.Reserve(s, []alert.Notification{n}, n.Time)
		s = reencode(t, s, n.Time)
		d.Deliver(context.Background(), s, nil, now)
		if sent := len(sink.got()) == 1; sent != c.sent {
			t.Errorf("reserved %s ahead: sent %t, want %t (outbox %d)", c.ahead, sent, c.sent, len(s.Outbox))
		}
	}
}
