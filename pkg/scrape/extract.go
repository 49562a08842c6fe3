// Package scrape extracts the few series the watchdog judges by from the scheduler's
// metrics page. It never guesses: what it cannot read with certainty is an *Error ("unknown").
package scrape

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// Metric names exported by the AgentENV scheduler (docs/design.md §1).
const (
	ObservedNodesMetric = "agentenv_scheduler_observed_nodes"
	RPCDurationMetric   = "agentenv_scheduler_rpc_duration_seconds"
	WatchAgeMetric      = "agentenv_scheduler_watch_last_event_age_seconds" // optional; proposed upstream
)

// ObservedStatuses are written on every refresh: a page missing one is cut short or not the scheduler's.
var ObservedStatuses = []string{"ready", "connecting", "unhealthy", "lingering", "unspecified"}

// maxKeptBytes bounds what the parser gets: a real scheduler's watched families are a few hundred bytes.
const maxKeptBytes = 1 << 20

// Sample is what one scrape says about the scheduler's discovery.
type Sample struct {
	Observed map[string]int `json:"observed"` // agentenv_scheduler_observed_nodes by status
	// HeartbeatOK and HeartbeatRejected count Heartbeat RPCs with status ok and
	// invalid_argument; an absent series is 0 (created by the first such RPC).
	HeartbeatOK       uint64 `json:"heartbeatOK"`
	HeartbeatRejected uint64 `json:"heartbeatRejected"`
	// WatchAge is the optional freshness gauge in seconds; nil when absent or invalid.
	WatchAge *float64 `json:"watchAgeSeconds,omitempty"`
	// Warnings say why optional series were dropped (a required one's doubt is an *Error).
	Warnings []string `json:"warnings,omitempty"`
}

// Ready is the number of nodes the scheduler counts as ready.
func (s Sample) Ready() int { return s.Observed["ready"] }

// Extract reads a Prometheus text page into a sample. It keeps only the watched
// families' lines (memory does not grow with the page) and parses those with expfmt.
func Extract(r io.Reader) (Sample, error) {
	kept, err := filterFamilies(r)
	if err != nil {
		return Sample{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(kept))
	if err != nil {
		return Sample{}, &Error{Kind: KindParse, Err: err}
	}
	return sampleFromFamilies(families)
}

var (
	seriesNames = [][]byte{[]byte(ObservedNodesMetric), []byte(RPCDurationMetric + "_count"),
		[]byte(WatchAgeMetric)}
	commentNames = map[string]bool{ObservedNodesMetric: true, RPCDurationMetric: true, RPCDurationMetric + "_count": true,
		WatchAgeMetric: true}
	errCutLine = &Error{Kind: KindTruncated, Err: errors.New("the page ends in the middle of a line")}
)

// filterFamilies keeps the watched families' lines, checking that the page is not cut
// off mid-line and that no series appears twice (expfmt leaves duplicates to its caller).
func filterFamilies(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var kept bytes.Buffer
	seen := make(map[string]struct{}, 16)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: none of ours is, so only its head matters.
			if family := watched(line); family != "" {
				return nil, &Error{Kind: KindInvalid, Err: fmt.Errorf("a %s line is longer than %d bytes", family, br.Size())}
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n') // skip the rest of the line
			}
			switch {
			case err == io.EOF:
				return nil, errCutLine
			case err != nil:
				return nil, classifyReadError(err)
			}
			continue
		}
		if errors.Is(err, httpbound.ErrTooLarge) {
			return nil, err // a line cut by the cap, not a cut-off page
		}
		if watched(line) != "" {
			if line[len(line)-1] != '\n' {
				return nil, errCutLine
			}
			if key, ok := seriesKey(line); ok {
				if _, dup := seen[key]; dup {
					return nil, &Error{Kind: KindInvalid, Err: fmt.Errorf("duplicate series %s", key)}
				}
				seen[key] = struct{}{}
			}
			if kept.Len()+len(line) > maxKeptBytes {
				return nil, &Error{Kind: KindInvalid, Err: fmt.Errorf("the watched families exceed %d bytes: too many series", maxKeptBytes)}
			}
			kept.Write(line)
		}
		if err == io.EOF {
			if len(line) > 0 && line[len(line)-1] != '\n' {
				return nil, errCutLine
			}
			return kept.Bytes(), nil
		}
		if err != nil {
			return nil, classifyReadError(err)
		}
	}
}

// watched names a kept line's series, "metric comment" for a HELP or TYPE line, or "".
func watched(line []byte) string {
	line = bytes.TrimLeft(line, " \t")
	if len(line) > 0 && line[0] == '#' {
		fields := bytes.Fields(line)
		if len(fields) >= 3 && (string(fields[1]) == "HELP" || string(fields[1]) == "TYPE") &&
			commentNames[string(fields[2])] {
			return "metric comment"
		}
		return ""
	}
	for _, name := range seriesNames {
		if bytes.HasPrefix(line, name) && len(line) > len(name) &&
			bytes.IndexByte([]byte("{ \t"), line[len(name)]) >= 0 {
			return string(name)
		}
	}
	return ""
}

// seriesKey is a sample line's name and sorted labels (reordered duplicates are duplicates).
func seriesKey(line []byte) (string, bool) {
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 || line[0] == '#' {
		return "", false
	}
	open := bytes.IndexByte(line, '{')
	if open < 0 {
		return string(bytes.Fields(line)[0]), true
	}
	closing := bytes.LastIndexByte(line, '}')
	if closing < open {
		return string(line), true // malformed; the parser will say so
	}
	var labels []string
	for l := range strings.SplitSeq(string(line[open+1:closing]), ",") {
		if l = strings.TrimSpace(l); l != "" {
			labels = append(labels, l)
		}
	}
	slices.Sort(labels)
	return string(line[:open]) + "{" + strings.Join(labels, ",") + "}", true
}

func sampleFromFamilies(families map[string]*dto.MetricFamily) (Sample, error) {
	observed, ok := families[ObservedNodesMetric]
	if !ok {
		return Sample{}, &Error{Kind: KindAbsent, Err: fmt.Errorf("metric family %s is absent (query-only scheduler, or not a scheduler page)", ObservedNodesMetric)}
	}
	if t := observed.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
		return Sample{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("%s has type %s, want gauge", ObservedNodesMetric, t)}
	}
	s := Sample{Observed: make(map[string]int, len(ObservedStatuses))}
	for _, m := range observed.GetMetric() {
		status := labelValue(m, "status")
		if _, dup := s.Observed[status]; dup {
			// Another label tells two series of one status apart: which is meant is a guess (FuzzExtract).
			return Sample{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("%s has more than one series with status=%q", ObservedNodesMetric, status)}
		}
		n, err := whole(value(observed, m))
		if err == nil && n > math.MaxInt32 {
			err = fmt.Errorf("value %g is implausibly large", float64(n))
		}
		if err != nil {
			return Sample{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("%s{status=%q}: %w", ObservedNodesMetric, status, err)}
		}
		s.Observed[status] = int(n)
	}
	for _, status := range ObservedStatuses {
		if _, ok := s.Observed[status]; !ok {
			return Sample{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("%s has no status=%q series (the scheduler writes all five on every refresh; page cut short?)", ObservedNodesMetric, status)}
		}
	}

	var err error
	if s.HeartbeatOK, err = heartbeatCount(families, "ok"); err != nil {
		return Sample{}, err
	}
	if s.HeartbeatRejected, err = heartbeatCount(families, "invalid_argument"); err != nil {
		return Sample{}, err
	}
	s.WatchAge, s.Warnings = watchAge(families)
	return s, nil
}

// watchAge reads the optional freshness gauge: an untrusted value (NaN or ±Inf, a
// plausible "no event yet"; negative; several series) drops it with a warning only.
func watchAge(families map[string]*dto.MetricFamily) (*float64, []string) {
	fam, ok := families[WatchAgeMetric]
	if !ok || len(fam.GetMetric()) == 0 {
		return nil, nil
	}
	if n := len(fam.GetMetric()); n > 1 {
		return nil, []string{fmt.Sprintf("optional gauge %s ignored: %d series, want one", WatchAgeMetric, n)}
	}
	v := value(fam, fam.GetMetric()[0])
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return nil, []string{fmt.Sprintf("optional gauge %s ignored: value %g is not a finite non-negative age", WatchAgeMetric, v)}
	}
	return &v, nil
}

// heartbeatCount reads the Heartbeat RPC's _count for status (a histogram's, or an untyped series).
func heartbeatCount(families map[string]*dto.MetricFamily, status string) (uint64, error) {
	name := RPCDurationMetric + "_count"
	var n uint64
	var err error
	if fam, ok := families[RPCDurationMetric]; ok && fam.GetType() == dto.MetricType_HISTOGRAM {
		h := heartbeatSeries(fam, status).GetHistogram()
		if f := h.GetSampleCountFloat(); f != 0 {
			// expfmt keeps a count that is not a whole number (or NaN) as a float.
			n, err = whole(f)
		} else {
			n = h.GetSampleCount()
		}
	} else if m := heartbeatSeries(families[name], status); m != nil {
		n, err = whole(value(families[name], m))
	}
	if err != nil {
		return 0, &Error{Kind: KindInvalid, Err: fmt.Errorf("%s{rpc=\"Heartbeat\",status=%q}: %w", name, status, err)}
	}
	return n, nil
}

func heartbeatSeries(fam *dto.MetricFamily, status string) *dto.Metric {
	for _, m := range fam.GetMetric() {
		if labelValue(m, "rpc") == "Heartbeat" && labelValue(m, "status") == status {
			return m
		}
	}
	return nil
}

// value is a gauge, counter or untyped sample's value, as its family types it.
func value(fam *dto.MetricFamily, m *dto.Metric) float64 {
	switch fam.GetType() {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// whole accepts a count: a whole number that a float64 holds exactly.
func whole(v float64) (uint64, error) {
	switch {
	case math.IsNaN(v):
		return 0, errors.New("value is NaN")
	case math.IsInf(v, 0):
		return 0, errors.New("value is infinite")
	case v < 0:
		return 0, fmt.Errorf("value %g is negative", v)
	case v > 1<<53:
		return 0, fmt.Errorf("value %g is beyond exact float precision", v)
	case v != math.Trunc(v):
		return 0, fmt.Errorf("value %g is not a whole number", v)
	}
	return uint64(v), nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
